package request

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPrepare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
		err            error
	}{
		{"plain", "say hello", "say hello", nil},
		{"trailing whitespace trimmed", "say hello \n\n\t", "say hello", nil},
		{"leading trimmed, as Codex records it", "  \n  indented\nline", "indented\nline", nil},
		{"inner white space kept", "a  b\n\n\tc", "a  b\n\n\tc", nil},
		{"slash command", "/exit", "", ErrSlashCommand},
		{"slash command with args", "/model gpt", "", ErrSlashCommand},
		{"slash command case-insensitive", "/EXIT now", "", ErrSlashCommand},
		{"slash command after blank lines", "\n  \n  /clear\nmore", "", ErrSlashCommand},
		{"slash command after a tab", "\t/exit", "", ErrSlashCommand},
		{"Codex custom prompt", "/prompts:foo x", "", ErrSlashCommand},
		{"Claude Code plugin command", "/myplugin:deploy prod", "", ErrSlashCommand},
		{"nested command", "/frontend:components:button", "", ErrSlashCommand},
		{"name with a dot", "/exit.", "", ErrSlashCommand},
		{"name with digits, '-' and '_'", "/run_2-fast now", "", ErrSlashCommand},
		{"name starting with a digit", "/1 go", "", ErrSlashCommand},
		{"punctuation in the name", "/exit, please", "", ErrSlashCommand},
		{"non-ASCII name", "/café", "", ErrSlashCommand},
		{"name ends at a line break", "/exit\nplease", "", ErrSlashCommand},
		{"name ends at a no-break space", "/exit\u00a0now/x", "", ErrSlashCommand},
		{"slash alone", "/", "", ErrSlashCommand},
		{"slash and text", "/ then what", "", ErrSlashCommand},
		{"top-level directory", "/etc is missing", "", ErrSlashCommand},
		{"slash on a later line is text", "please run\n/exit", "please run\n/exit", nil},
		{"path is not a command", "/tmp/x is a path", "/tmp/x is a path", nil},
		{"long path is not a command", "/usr/bin/foo is broken", "/usr/bin/foo is broken", nil},
		{"directory with a trailing slash", "/etc/ is missing", "/etc/ is missing", nil},
		{"double slash is not a command", "//exit", "//exit", nil},
		{"slash after the first word", "run /exit", "run /exit", nil},
		{"empty", "", "", ErrEmpty},
		{"blank", " \n\t ", "", ErrEmpty},
		{"unicode space trimmed", "hi\u00a0\u3000", "hi", nil},
		{"bang runs a shell in Claude Code", "!id > proof.txt", "", ErrShellCommand},
		{"bang after blank lines", " \n\t !ls", "", ErrShellCommand},
		{"bang alone", "!", "", ErrShellCommand},
		{"bang later in the text", "say hi!\n!not a command here", "say hi!\n!not a command here", nil},
		{"DEL erases a character", "x\u007f/cost", "", ErrControl},
		{"Ctrl-C twice exits", "bye\u0003\u0003", "", ErrControl},
		{"embedded paste-end marker", "a\n\u001b[201~\r/exit\r", "", ErrControl},
		{"carriage return is Enter", "a\rb", "", ErrControl},
		{"trailing carriage return", "a\r\n", "", ErrControl},
		{"NUL", "a\x00", "", ErrControl},
		{"vertical tab", "\va", "", ErrControl},
		{"C1 CSI", "a\u009b201~", "", ErrControl},
		{"C1 NEL", "a\u0085b", "", ErrControl},
		{"invalid UTF-8", "a\x9b201~", "", ErrInvalidUTF8},
		{"truncated UTF-8", "caf\xc3", "", ErrInvalidUTF8},
		{"replacement character is text", "a\ufffdb", "a\ufffdb", nil},
		{"tab and line feed are text", "a\tb\nc", "a\tb\nc", nil},
		{"U+00A0 and beyond are text", "\u00a1\u00ff\u2028x", "\u00a1\u00ff\u2028x", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Prepare(tt.in)
			if !errors.Is(err, tt.err) {
				t.Fatalf("Prepare(%q) error %v, want %v", tt.in, err, tt.err)
			}
			if p.Text != tt.want {
				t.Errorf("Prepare(%q) = %q, want %q", tt.in, p.Text, tt.want)
			}
			if err == nil && p.Hash != Hash(tt.want) {
				t.Errorf("hash %s is not the hash of the payload", p.Hash)
			}
		})
	}
}

// TestPrepareNamesTheCharacter checks that a refusal says which character
// is wrong and where, counting bytes and characters from 0.
func TestPrepareNamesTheCharacter(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"bye\u0003\u0003", "U+0003 (ETX, Ctrl-C) at byte offset 3 (character offset 3"},
		{"x\u007f/cost", "U+007F (DEL, Backspace) at byte offset 1 (character offset 1"},
		{"é\u001b[201~", "U+001B (ESC, escape) at byte offset 2 (character offset 1"},
		{"ab\u009b", "U+009B (a C1 control) at byte offset 2 (character offset 2"},
		{"é\xff", "byte 0xff at byte offset 2 (character offset 1"},
		{"!id", "starts with '!'"},
		{"/prompts:foo x", `"/prompts:foo"`},
		{"/exit.", "put text before it"},
	}
	for _, tt := range tests {
		_, err := Prepare(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Prepare(%q) error %v, want it to say %q", tt.in, err, tt.want)
		}
	}
}

// FuzzPrepare checks that whatever Prepare accepts is text a terminal
// cannot take as a key or a control sequence: valid UTF-8, no byte below
// 0x20 but line feed and tab, no DEL, no C1 control, and no leading '!' or
// slash command; and that its payload and hash are consistent.
func FuzzPrepare(f *testing.F) {
	for _, s := range []string{"say hello", "!id > proof.txt", "x\u007f/cost", "bye\u0003\u0003",
		"a\n\u2026\u001b[201~\r/exit\r", "a\x9b201~", " \n /exit", "é\u0085", "\t!x", "/prompts:x", "/usr/bin", "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := Prepare(in)
		if err != nil {
			if p != (Payload{}) {
				t.Fatalf("Prepare(%q) refused with a payload %+v", in, p)
			}
			return
		}
		if !safe(p.Text) {
			t.Fatalf("Prepare(%q) accepted %q", in, p.Text)
		}
		if p.Text == "" || p.Text[0] == '!' || commandWord(p.Text) || !strings.Contains(in, p.Text) || p.Hash != Hash(p.Text) {
			t.Fatalf("Prepare(%q) = %+v", in, p)
		}
	})
}

// commandWord reports, independently of slashCommand, whether s starts
// with a word an agent's composer takes as a command: '/' and no other '/'
// before the first white space.
func commandWord(s string) bool {
	f := strings.Fields(s)
	return len(f) > 0 && strings.HasPrefix(f[0], "/") && strings.Count(f[0], "/") == 1
}

// safe reports, byte by byte, that s holds nothing a terminal reads as a
// control: it is the property Prepare promises, checked independently of
// its code.
func safe(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	b := []byte(s)
	for i, c := range b {
		switch {
		case c < 0x20 && c != '\n' && c != '\t', c == 0x7f:
			return false
		case c == 0xc2 && i+1 < len(b) && b[i+1] >= 0x80 && b[i+1] <= 0x9f: // U+0080–U+009F
			return false
		}
	}
	return true
}

func TestHash(t *testing.T) {
	t.Parallel()
	// sha256("say hello"), computed independently.
	if got, want := Hash("say hello"), "3cad3da3dbbe1c106b3219f6c278a565f411cee74f0848956aff65d3df4846a7"; got != want {
		t.Errorf("Hash = %s, want %s", got, want)
	}
}
