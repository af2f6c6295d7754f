package events

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzDecode feeds arbitrary bodies (and the subject they arrived on) to
// Decode and CheckSubject. Decode must never panic; an accepted event must
// pass Validate and survive Marshal→Decode unchanged; a rejected one must
// carry a known reason and a detail fit for a NATS header.
//
// Seeds: testdata/fuzz/FuzzDecode/ (one per reject reason, edge numbers,
// unicode, odd member names) and the two examples under testdata/.
//
//	go test -fuzz FuzzDecode -fuzztime 60s ./internal/events/
func FuzzDecode(f *testing.F) {
	for _, name := range []string{successFile, errorFile} {
		f.Add(readTestdata(f, name), "ledger.attempts.agent-42_run-0007.req_7f3a9c2e")
	}
	f.Fuzz(func(t *testing.T, data []byte, subject string) {
		a, err := Decode(data)
		if err != nil {
			require.Nil(t, a)
			var re *RejectError
			require.ErrorAs(t, err, &re, "Decode must return a *RejectError, got %T", err)
			switch re.Reason {
			case ReasonInvalidField:
				var fe *FieldError
				require.ErrorAs(t, err, &fe)
				require.NotEmpty(t, fe.Field)
				require.Equal(t, fe.Error(), re.Detail)
			case ReasonTooLarge, ReasonMalformedJSON, ReasonUnknownSchema:
			default:
				t.Fatalf("Decode returned reason %q, which it must never give", re.Reason)
			}
			requireHeaderSafe(t, re.Detail)
			return
		}

		require.NoError(t, a.Validate())
		require.Equal(t, SchemaV1, a.Schema)
		require.Equal(t, time.UTC, a.StartedAt.Location())
		require.Equal(t, time.UTC, a.FinishedAt.Location())

		body, err := Marshal(a)
		require.NoError(t, err)
		again, err := Decode(body)
		require.NoError(t, err, "Marshal wrote a body Decode refuses: %s", body)
		require.Equal(t, a, again)
		body2, err := Marshal(again)
		require.NoError(t, err)
		require.Equal(t, string(body), string(body2))

		own := Subject(a.SessionID, a.RequestID)
		session, request, ok := ParseSubject(own)
		require.True(t, ok)
		require.Equal(t, a.SessionID, session)
		require.Equal(t, a.RequestID, request)
		require.NoError(t, CheckSubject(own, a))
		if err := CheckSubject(subject, a); subject == own {
			require.NoError(t, err)
		} else {
			requireReject(t, err, ReasonSubjectMismatch, "")
		}
	})
}

// TestFuzzSeeds keeps the seed corpus honest: each file's name says what
// its body must do (valid_*, subject_mismatch_*, or the reject reason it
// must get), so a seed cannot silently drift into testing something else.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(entries), 12)
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			data, subject := readSeed(t, filepath.Join(dir, e.Name()))
			a, err := Decode(data)
			name := e.Name()
			switch {
			case strings.HasPrefix(name, "valid_"):
				require.NoError(t, err)
				require.NoError(t, CheckSubject(subject, a))
			case strings.HasPrefix(name, string(ReasonSubjectMismatch)+"_"):
				require.NoError(t, err)
				requireReject(t, CheckSubject(subject, a), ReasonSubjectMismatch, "")
			default:
				var reason Reason
				for _, r := range []Reason{ReasonTooLarge, ReasonMalformedJSON, ReasonUnknownSchema, ReasonInvalidField} {
					if strings.HasPrefix(name, string(r)+"_") {
						reason = r
					}
				}
				require.NotEmpty(t, reason, "seed name must start with valid_, a reason, or subject_mismatch_")
				var re *RejectError
				require.ErrorAs(t, err, &re)
				require.Equal(t, reason, re.Reason, "detail: %s", re.Detail)
			}
		})
	}
}

// readSeed reads a corpus file in the "go test fuzz v1" format holding a
// []byte and a string.
func readSeed(t *testing.T, path string) ([]byte, string) {
	t.Helper()
	content, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(content)), "\n")
	require.Len(t, lines, 3)
	require.Equal(t, "go test fuzz v1", lines[0])
	unquote := func(line, typ string) string {
		lit, ok := strings.CutPrefix(line, typ+"(")
		require.True(t, ok, line)
		lit, ok = strings.CutSuffix(lit, ")")
		require.True(t, ok, line)
		s, err := strconv.Unquote(lit)
		require.NoError(t, err, line)
		return s
	}
	return []byte(unquote(lines[1], "[]byte")), unquote(lines[2], "string")
}
