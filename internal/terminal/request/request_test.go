package request

import (
	"errors"
	"testing"
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
		{"slash on a later line is text", "please run\n/exit", "please run\n/exit", nil},
		{"path is not a command", "/tmp/x is a path", "/tmp/x is a path", nil},
		{"slash digit is not a command", "/1 go", "/1 go", nil},
		{"empty", "", "", ErrEmpty},
		{"blank", " \n\t ", "", ErrEmpty},
		{"unicode space trimmed", "hi\u00a0\u3000", "hi", nil},
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

func TestHash(t *testing.T) {
	t.Parallel()
	// sha256("say hello"), computed independently.
	if got, want := Hash("say hello"), "3cad3da3dbbe1c106b3219f6c278a565f411cee74f0848956aff65d3df4846a7"; got != want {
		t.Errorf("Hash = %s, want %s", got, want)
	}
}
