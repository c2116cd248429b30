package agentsession

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
)

// The bounds of what a runtime's reply may write on an attachment record.
// A reply's metadata is merged onto the stored metadata and sent back in
// every later ref, so without a bound a runtime adding keys on each reply
// grows the record, and every call after it, without limit. Real metadata is
// a handful of short identifiers (the tmux-terminal runtime sends five, under
// 200 bytes in all); 256 keys and 64 KiB leave room for far richer modules
// while keeping a record, and the ref sent with each call, small.
const (
	// MetadataMaxKeys caps the keys of an attachment's metadata.
	MetadataMaxKeys = 256
	// MetadataMaxBytes caps the JSON encoding of an attachment's metadata
	// (one object of string values, as json.Marshal writes it).
	MetadataMaxBytes = 64 << 10
	// HostMax caps a host in bytes (a DNS name has at most 253).
	HostMax = 255
	// RemoteURLMax caps a remote URL in bytes.
	RemoteURLMax = 2048
)

// ErrInvalidReply is wrapped by the error of a runtime reply that
// [CheckObservation] refuses. [Registry.Dispatch] records such a reply as
// <op>_failed and writes none of it.
var ErrInvalidReply = errors.New("reply refused")

// CheckObservation checks what obs, a runtime's reply about the session ref
// names, would write on its record, and refuses the whole reply when:
//
//   - providerSessionId is not a safe handle (see [ValidHandle]);
//   - host is longer than [HostMax] or holds anything but letters, digits
//     and . _ - : [ ] (a host name or address, with an optional port);
//   - remoteUrl is longer than [RemoteURLMax], is not an absolute http or
//     https URL of printable ASCII, carries user information, or has a query
//     or fragment parameter whose name looks like a credential (token, key,
//     secret, …);
//   - ref's metadata overlaid by the reply's would exceed [MetadataMaxKeys]
//     keys or [MetadataMaxBytes] bytes. A reply without metadata adds
//     nothing and is never refused for the metadata already stored.
//
// These fields are stored and shown to callers (the remote URL in a blocked
// delegation's notice), so a credential or a terminal escape sequence in
// them would reach whoever reads the task. The error wraps
// [ErrInvalidReply], says what was wrong and what the runtime should send
// instead, and never quotes the refused values. A nil obs is valid.
func CheckObservation(ref Ref, obs *Observation) error {
	if obs == nil {
		return nil
	}
	var problems []string
	if obs.ProviderSessionID != "" && !ValidHandle(obs.ProviderSessionID) {
		problems = append(problems, "providerSessionId is not a safe handle (1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit)")
	}
	if obs.Host != "" {
		if p := hostProblem(obs.Host); p != "" {
			problems = append(problems, p)
		}
	}
	if obs.RemoteURL != "" {
		if p := remoteURLProblem(obs.RemoteURL); p != "" {
			problems = append(problems, p)
		}
	}
	if md := coerceMetadata(obs.Metadata); md != nil {
		if p := metadataProblem(mergeMetadata(ref.Metadata, md)); p != "" {
			problems = append(problems, p+"; the stored metadata is kept: update existing keys instead of adding new ones with each reply")
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidReply, strings.Join(problems, "; "))
}

// mergeMetadata returns base overlaid by over, as a new map (nil when both
// are empty).
func mergeMetadata(base, over map[string]string) map[string]string {
	if len(base) == 0 && len(over) == 0 {
		return nil
	}
	merged := make(map[string]string, len(base)+len(over))
	maps.Copy(merged, base)
	maps.Copy(merged, over)
	return merged
}

// metadataProblem says how md exceeds the metadata bounds, or "" when it
// does not.
func metadataProblem(md map[string]string) string {
	if len(md) > MetadataMaxKeys {
		return fmt.Sprintf("metadata would hold %d keys, over the limit of %d", len(md), MetadataMaxKeys)
	}
	if n := metadataSize(md); n > MetadataMaxBytes {
		return fmt.Sprintf("metadata would take %d bytes, over the limit of %d", n, MetadataMaxBytes)
	}
	return ""
}

// metadataSize returns the length of md's JSON encoding.
func metadataSize(md map[string]string) int {
	b, _ := json.Marshal(md) // a map of strings always encodes
	return len(b)
}

// hostProblem says what is wrong with a reported host, or "" when nothing
// is.
func hostProblem(h string) string {
	if len(h) > HostMax {
		return fmt.Sprintf("host is %d bytes long, over the limit of %d", len(h), HostMax)
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !isAlnum(c) && strings.IndexByte("._-:[]", c) < 0 {
			return "host may hold only letters, digits, '.', '_', '-', ':', '[' and ']' (a host name or address, with an optional port)"
		}
	}
	return ""
}

// remoteURLProblem says what is wrong with a reported remote URL, or ""
// when nothing is.
func remoteURLProblem(raw string) string {
	if len(raw) > RemoteURLMax {
		return fmt.Sprintf("remoteUrl is %d bytes long, over the limit of %d", len(raw), RemoteURLMax)
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c >= 0x7f {
			return "remoteUrl holds a space, a control character or a non-ASCII byte; percent-encode them"
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "remoteUrl is not an absolute http or https URL"
	}
	if u.User != nil {
		return "remoteUrl carries user information (user:password@); send the URL without credentials"
	}
	if secretParam(u.RawQuery) || secretParam(u.EscapedFragment()) {
		return "remoteUrl has a query or fragment parameter named like a credential (token, key, secret, …); send the URL without credentials"
	}
	return ""
}

// secretParam reports whether a raw "a=b&c=d" list has a parameter whose
// name looks like it carries a credential: the words ClawConnect hides when
// it shows a URL of its own.
func secretParam(raw string) bool {
	for p := range strings.SplitSeq(raw, "&") {
		name, _, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		name = strings.ToLower(name)
		for _, s := range []string{"token", "pass", "pwd", "secret", "key", "auth", "sig", "credential", "session"} {
			if strings.Contains(name, s) {
				return true
			}
		}
	}
	return false
}
