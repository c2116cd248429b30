package task

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/taskapi"
)

// idRE is the regular expression safeID replaces; both must accept exactly
// the same language.
var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func TestSafeIDMatchesRegexp(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"uuid", "0f8fad5b-d9cb-469f-a165-70867728950e"},
		{"leading dot", ".x"},
		{"leading dash", "-x"},
		{"slash", "a/b"},
		{"trailing newline", "abc\n"},
		{"non-ascii", "aé"},
		{"invalid utf8", "a\xff"},
		{"128", strings.Repeat("a", 128)},
		{"129", strings.Repeat("a", 129)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := safeID(tt.in), idRE.MatchString(tt.in); got != want {
				t.Errorf("safeID(%q) = %t, regexp says %t", tt.in, got, want)
			}
		})
	}
	for _, n := range []int{1, 2, 127, 128, 129} {
		for _, pos := range []int{0, n / 2, n - 1} {
			for c := range 256 {
				b := []byte(strings.Repeat("a", n))
				b[pos] = byte(c)
				if got, want := safeID(string(b)), idRE.Match(b); got != want {
					t.Fatalf("safeID(len %d, byte %#x at %d) = %t, regexp says %t", n, c, pos, got, want)
				}
			}
		}
	}
}

// FuzzSafeID checks safeID against the regular expression it replaces.
func FuzzSafeID(f *testing.F) {
	for _, s := range []string{"", "a", "0f8fad5b-d9cb", ".a", "a/b", "a\n", strings.Repeat("y", 128), strings.Repeat("z", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := safeID(s), idRE.MatchString(s); got != want {
			t.Errorf("safeID(%q) = %t, regexp says %t", s, got, want)
		}
	})
}

// TestLazyRegexps compiles every lazily compiled pattern of the package, so
// a typo fails here rather than on the first task that needs it.
func TestLazyRegexps(t *testing.T) {
	for _, re := range []func() *regexp.Regexp{patchFileRE, prURLRE, branchRE} {
		first := re()
		if second := re(); first == nil || first != second {
			t.Fatal("lazy regexp not compiled exactly once")
		}
	}
	for _, c := range errorClasses {
		if c.re() == nil {
			t.Fatalf("error class %s: no regexp", c.category)
		}
	}
}

func TestClassifyError(t *testing.T) {
	tests := []struct {
		msg, want string
	}{
		{"request failed: 401 Unauthorized", "auth"},
		{"Permission denied (publickey)", "auth"},
		{"the run Timed out after 30s", "timeout"},
		{"connect ETIMEDOUT 10.0.0.1", "timeout"},
		{"CONFLICT (content): Merge conflict in a.go", "merge_conflict"},
		{"3 tests failed", "test_failure"},
		{"expect(x).toBe(1) received 2", "test_failure"},
		{"spawn git ENOENT", "tooling"},
		{"bash: rg: command not found", "tooling"},
		{"something else broke", "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.want+"/"+tt.msg, func(t *testing.T) {
			got := classifyError(tt.msg)
			if got.Category != tt.want || got.Message != tt.msg || got.SuggestedRecovery == "" {
				t.Errorf("classifyError(%q) = %+v, want category %s", tt.msg, got, tt.want)
			}
		})
	}
}

func TestSummaryArtifacts(t *testing.T) {
	tests := []struct {
		name, summary string
		want          taskapi.Artifacts
	}{
		{"empty", "", taskapi.Artifacts{}},
		{"pr commit branch", "Opened https://github.com/acme/app/pull/42 from branch `fix/login` at commit 1a2b3c4d.",
			taskapi.Artifacts{PRURL: "https://github.com/acme/app/pull/42", CommitSHA: "1a2b3c4d", BranchName: "fix/login"}},
		{"checkout", "ran git checkout -b feat-x then pushed", taskapi.Artifacts{BranchName: "feat-x"}},
		{"question", "Done with step one. Shall I continue?", taskapi.Artifacts{NeedsHumanDecision: true}},
		{"waiting", "I am Waiting For your answer on the schema.", taskapi.Artifacts{NeedsHumanDecision: true}},
		{"short hex is no commit", "see abc12", taskapi.Artifacts{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got taskapi.Artifacts
			addSummaryArtifacts(&got, tt.summary)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("addSummaryArtifacts(%q) mismatch (-want +got):\n%s", tt.summary, diff)
			}
		})
	}
}

// FuzzSummaryArtifactsAsExpressions holds the summary scan to what the
// expressions alone find: the literal checks in front of some skip only
// summaries they would not match, and the plain scans match as they would.
func FuzzSummaryArtifactsAsExpressions(f *testing.F) {
	for _, s := range []string{"see https://github.com/a/b/pull/1", "on branch main", "git checkout -b x", "git switch -c y",
		"branchy", "switch -cz", "http://github.com/a/b/pull/2", "no artifacts", "at 1a2b3c4 and deadbeefcafe", "1a2b3c4d_x",
		"é1a2b3c4é", strings.Repeat("0", 41) + " abcdef12", "PLEASE CONFIRM", "Which Option?", "waiting \u017fomething", "choo\u017fe between",
		strings.Repeat("é", 210) + "please confirm", "please confirm" + strings.Repeat("x", 200), "\xff\xfe waiting for",
		"wait\u0130ng for", "\xe2\u017fe", "ple\xc5ase confirm", "which \u212aoption", "\xe2\x84please confirm"} {
		f.Add(s)
	}
	commitRE := regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)
	needsHumanRE := regexp.MustCompile(`(?i)` + strings.Join(decisionPhrases, "|"))
	f.Fuzz(func(t *testing.T, summary string) {
		if summary == "" {
			return
		}
		var got taskapi.Artifacts
		addSummaryArtifacts(&got, summary)
		want := taskapi.Artifacts{PRURL: prURLRE().FindString(summary), CommitSHA: commitRE.FindString(summary)}
		if m := branchRE().FindStringSubmatch(summary); m != nil {
			want.BranchName = m[1]
		}
		tail := summary
		if r := []rune(summary); len(r) > 200 {
			tail = string(r[len(r)-200:])
		}
		want.NeedsHumanDecision = strings.HasSuffix(strings.TrimSpace(tail), "?") || needsHumanRE.MatchString(tail)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("addSummaryArtifacts(%q) differs from the expressions alone (-want +got):\n%s", summary, diff)
		}
	})
}

func TestPatchArtifacts(t *testing.T) {
	patch := "*** Begin Patch\n*** Update File: a/b.go\n@@\n-x\n+y\n*** Add File: c.txt\n+++ b/d/e.go\n*** End Patch"
	args, err := json.Marshal(map[string]string{"input": patch})
	if err != nil {
		t.Fatal(err)
	}
	var got taskapi.Artifacts
	addToolArtifacts(&got, "apply_patch", args)
	if diff := cmp.Diff([]string{"a/b.go", "c.txt", "d/e.go"}, got.FilesChanged); diff != "" {
		t.Errorf("files changed mismatch (-want +got):\n%s", diff)
	}
}

// BenchmarkSummaryArtifacts scans an agent's summary of a usual length,
// with no artifacts in it.
func BenchmarkSummaryArtifacts(b *testing.B) {
	for _, bc := range []struct{ name, sentence string }{
		{"ascii", "I updated the handler so that the retry waits for the lease, ran the tests, and they pass. "},
		{"utf8", "I updated the handler \u2014 the retry waits for the lease \u2014 ran the tests, and they pass. "},
	} {
		summary := strings.Repeat(bc.sentence, 20)
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				var a taskapi.Artifacts
				addSummaryArtifacts(&a, summary)
			}
		})
	}
}
