package events

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
)

// requireSameDecode asserts that Decode and the reference decoder agree on
// data: the same *Attempt, deeply (times included, location and all), or
// the same *RejectError (reason, detail and the *FieldError it wraps). For
// an accepted body it also asserts that Marshal writes the reference's
// bytes.
func requireSameDecode(t testing.TB, data []byte) {
	t.Helper()
	want, wantErr := refDecode(data)
	got, gotErr := Decode(data)
	if wantErr != nil {
		require.Nil(t, got, "body %q: the reference refuses it (%v)", data, wantErr)
		require.Equal(t, wantErr, gotErr, "body %q", data)
		return
	}
	require.NoError(t, gotErr, "body %q", data)
	require.Equal(t, want, got, "body %q", data)
	wantBody, err := refMarshal(want)
	require.NoError(t, err)
	gotBody, err := Marshal(got)
	require.NoError(t, err)
	require.Equal(t, string(wantBody), string(gotBody))
}

// corpusBody reads the body of a corpus file in the "go test fuzz v1"
// format whose first value is a []byte.
func corpusBody(tb testing.TB, path string) []byte {
	tb.Helper()
	content, err := os.ReadFile(path)
	require.NoError(tb, err)
	lines := strings.Split(strings.TrimSpace(string(content)), "\n")
	require.GreaterOrEqual(tb, len(lines), 2, path)
	lit, ok := strings.CutPrefix(lines[1], "[]byte(")
	require.True(tb, ok, path)
	lit, ok = strings.CutSuffix(lit, ")")
	require.True(tb, ok, path)
	s, err := strconv.Unquote(lit)
	require.NoError(tb, err, path)
	return []byte(s)
}

// seedPaths are the members the seeds edit: every member the decoder
// reads, at every level, and unknown or differently cased ones.
var seedPaths = []string{
	"schema", "event_id", "request_id", "session_id", "attempt", "outcome", "final",
	"provider", "model", "usage", "usage.input_tokens", "usage.output_tokens",
	"usage.cache_read_input_tokens", "usage.cache_creation_input_tokens", "usage.reasoning_tokens",
	"error", "error.kind", "error.status", "error.retryable", "error.message", "error.provider_code",
	"started_at", "finished_at", "provider_request_id", "trace_id", "Event_ID", "Schema", "Usage",
	"labels", "labels.team", "labels.Team",
}

// seedLiterals are the values the seeds put there: every JSON kind, the
// integer edge cases, strings with escapes, invalid UTF-8 and surrogates,
// IDs, ULIDs and times at and beyond the edges of the fast paths.
var seedLiterals = []string{
	`null`, `true`, `false`, `{}`, `[]`, `[1,2]`, `{"a":[{"b":null}]}`, `{"kind":"server"}`,
	`0`, `-0`, `1`, `-1`, `7`, `1.0`, `1e0`, `0.1e1`, `10E-1`, `1e3`, `1E+3`, `1000.000`, `1000`, `1001`,
	`1.5`, `-0.5`, `1.0000000000000001`, `1e-400`, `1e309`, `1e99999999999999999999`, `99999999999999999999`,
	`123456789012345678`, `1234567890123456789`, `9223372036854775807`, `9223372036854775808`,
	`-9223372036854775808`, `-123456789012345678`, `1e12`, `5e11`, `1000000000000`, `1000000000001`,
	`1.000000000001e12`, `1000000000000.0000001`, `0.0e999999999999999999999`, `-0.0e5`, `0.1e13`,
	`42`, `99`, `100`, `429`, `429.0`, `429.5`, `599`, `600`, `1773480426`,
	`""`, `"x"`, `"1"`, `"429"`, `"true"`, `"boom"`, `"ledger.attempt.v1"`, `"ledger.attempt.v2"`,
	`"ledger.attempt\u002ev1"`, `"LEDGER.ATTEMPT.V1"`, `"ledger.attempt.v1 "`, "\"ledger.attempt.v1\xff\"",
	`"success"`, `"error"`, `"Success"`, `"ok"`, `"succ\u0065ss"`,
	`"rate_limit"`, `"circuit_open"`, `"teapot"`, `"RATE_LIMIT"`, `"conn\u0065ction"`,
	`"anthropic"`, `"openai"`, `"模型-β"`, `"m\ud83d\ude00"`, `"a\\udc00"`, `"m\udc00"`, `"\ude00\ud83d"`,
	`"\ud83d"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, `"\u0000"`, `"tab\there"`, `"q\"b\\s\/"`,
	"\"open\xc3ai\"", "\"bad \xff byte\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", `"überlastet: 服务器过载 🔥"`,
	`"` + strings.Repeat("p", 64) + `"`, `"` + strings.Repeat("p", 65) + `"`, `"` + strings.Repeat("m", 256) + `"`,
	`"` + strings.Repeat("m", 257) + `"`, `"` + strings.Repeat("é", 512) + `"`, `"` + strings.Repeat("é", 512) + `m"`,
	`"` + strings.Repeat("aB3_-", 25) + `xyz"`, `"` + strings.Repeat("aB3_-", 25) + `xyzz"`, `"a.b"`, `"a b"`, `"sessión"`,
	`"01JH8Y5WDR3M4N5P6Q7R8S9T0V"`, `"01jh8y5wdr3m4n5p6q7r8s9t0v"`, `"7ZZZZZZZZZZZZZZZZZZZZZZZZZ"`,
	`"8ZZZZZZZZZZZZZZZZZZZZZZZZZ"`, `"01JH8Y5WDR3M4N5P6Q7R8S9T0U"`, `"01JH8Y5WDR3M4N5P6Q7R8S9T0"`,
	`"01JH8Y5WDR3M4N5P6Q7R8S9T0VV"`, `"0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"`, `"01JH8Y5WDR3M4N5P6Q7R8S9T0\u0056"`,
	`"2026-03-14T09:27:06Z"`, `"2026-03-14T09:27:06.271828182Z"`, `"2026-03-14T09:27:14.000000001Z"`,
	`"2026-03-14T09:27:06.1Z"`, `"2026-03-14T09:27:06.12Z"`, `"2026-03-14T09:27:06.1234567891Z"`,
	`"2026-03-14T09:27:06.Z"`, `"2026-03-14T09:27:06,5Z"`, `"2026-03-14t09:27:06z"`, `"2026-03-14T09:27:06"`,
	`"2026-03-14 09:27:06Z"`, `"2026-02-29T00:00:00Z"`, `"2024-02-29T00:00:00Z"`, `"2000-02-29T00:00:00Z"`,
	`"1900-02-29T00:00:00Z"`, `"2026-04-31T00:00:00Z"`, `"2026-13-01T00:00:00Z"`, `"2026-00-01T00:00:00Z"`,
	`"2026-01-00T00:00:00Z"`, `"2026-03-14T24:00:00Z"`, `"2026-03-14T09:60:00Z"`, `"2026-03-14T09:27:60Z"`,
	`"0000-01-01T00:00:00Z"`, `"9999-12-31T23:59:59.999999999Z"`, `"9999-12-31T23:30:00-01:00"`,
	`"0000-01-01T00:30:00+01:00"`, `"2026-03-14T11:27:06.271828182+02:00"`, `"2026-03-14T02:27:14.000000001-07:00"`,
	`"2026-03-14T09:27:06+00:00"`, `"\u0032026-03-14T09:27:06Z"`, `"+2026-03-14T09:27:06Z"`, `"-001-03-14T09:27:06Z"`,
	`"2026-03-14T09:27:06.27182818Z"`, `"yesterday"`,
	`{"team":"search","user":"u-42"}`, `{"team":"a","team":"b"}`, `{"team":"a","team":1}`, `{"t\u0065am":"x"}`,
	`{"":"x"}`, `{"team":""}`, `{"team":"a\u007f"}`, `{"team":"a\u0085"}`, `{"team":"a\ud800"}`, `{"\ud800":"x"}`,
	"{\"te\xffam\":\"x\"}", "{\"a\xff\":\"x\",\"a\xfe\":1}", `{"k1":"1","k2":"2","k3":"3","k4":"4","k5":"5","k6":"6","k7":"7","k8":"8","k9":"9","ka":"a","kb":"b","kc":"c","kd":"d","ke":"e","kf":"f","kg":"g","kh":"h"}`,
}

// seedBodies are whole bodies: not JSON, not an object, or objects that
// only text can express.
var seedBodies = []string{
	``, ` `, " \n\t ", `{}`, `[]`, `[1]`, `[{"schema":"ledger.attempt.v1"}]`, `42`, `-1.5e3`, `"ledger.attempt.v1"`,
	`true`, `false`, `null`, ` null `, `nul`, `not json at all`, `{"schema":"ledger.attempt.v1",}`,
	`{'schema':'ledger.attempt.v1'}`, `{"schema":"ledger.attempt.v1"} {}`, `{"schema":"ledger.attempt.v1","attempt":NaN}`,
	"\x00", "\xef\xbb\xbf{}", `{"schema":{"a":1}}`, `{"schema":"ledger.attempt.v7"}`, `{"schema":null}`,
	`{"schema":"ledger.attempt.v1"}`, `{"schema":"ledger.attempt.v1","schema":null}`, `{"schema":1,"schema":"ledger.attempt.v1"}`,
	`{"schema":"ledger.attempt.v1","usage":{"input_tokens":1,}}`, `{"schema":"ledger.attempt.v1","x":[1,]}`,
	`{"schema":"ledger.attempt.v1","x":[1 2]}`, `{"schema":"ledger.attempt.v1","x":{"a" 1}}`, `{"schema":"ledger.attempt.v1","x":{1:2}}`,
	`{"schema":"ledger.attempt.v1","x":01}`, `{"schema":"ledger.attempt.v1","x":1.}`, `{"schema":"ledger.attempt.v1","x":.5}`,
	`{"schema":"ledger.attempt.v1","x":1e}`, `{"schema":"ledger.attempt.v1","x":-}`, `{"schema":"ledger.attempt.v1","x":+1}`,
	`{"schema":"ledger.attempt.v1","x":"\x"}`, `{"schema":"ledger.attempt.v1","x":"\u12"}`, `{"schema":"ledger.attempt.v1","x":"\u12G4"}`,
	"{\"schema\":\"ledger.attempt.v1\",\"x\":\"a\x1fb\"}", "{\"schema\":\"ledger.attempt.v1\",\"x\":\"a\x7fb\"}",
	`{"schema":"ledger.attempt.v1","x":tru}`, `{"schema":"ledger.attempt.v1","x":truex}`, `{"schema":"ledger.attempt.v1"`,
	`{"schema":"ledger.attempt.v1",`, `{"schema":"ledger.attempt.v1":`, `{"schema"}`, `{"schema":}`, `{,}`, `{"a":1}}`,
	"{\"schema\"\r\n:\t\"ledger.attempt.v1\"\r\n}\n", `{"sch\u0065ma":"ledger.attempt.v1"}`, `{"sch\u0045ma":"ledger.attempt.v1"}`,
	`{"schema\u0000":"ledger.attempt.v1"}`, "{\"sch\xffema\":\"ledger.attempt.v1\"}", `{"\u00e9":1,"schema":"ledger.attempt.v1"}`,
	`{"schema":"ledger.attempt.v1","usage":{"input_tokens":1},"usage":{"output_tokens":1}}`,
	`{"schema":"ledger.attempt.v1","usage":{"input_tokens":1},"usage":null}`, `{"schema":"ledger.attempt.v1","error":[],"error":{}}`,
}

// textEdits edit an example as text, for what a map cannot express:
// escaped and repeated names, whitespace, nesting depth.
func textEdits(s string) []string {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	out := []string{
		strings.Replace(s, `"event_id"`, `"event\u005fid"`, 1),
		strings.Replace(s, `"event_id"`, `"event\u005Fid"`, 1),
		strings.Replace(s, `"event_id"`, `"\u0065vent_id"`, 1),
		strings.Replace(s, `"usage": {`, `"us\u0061ge": {`, 1),
		strings.Replace(s, `"input_tokens"`, `"input\u005ftokens"`, 1),
		strings.Replace(s, `"error": {`, `"\u0065rror": {`, 1),
		strings.Replace(s, `"kind"`, `"k\u0069nd"`, 1),
		strings.Replace(s, `"attempt": `, `"attempt": 7, "attempt": `, 1),
		strings.Replace(s, `"attempt": `, `"attempt": 1001, "attempt": `, 1),
		strings.Replace(s, `"attempt": 1,`, `"attempt": 1, "attempt": 1001,`, 1),
		strings.Replace(s, `"attempt": 1,`, `"attempt": 1, "attempt": null,`, 1),
		strings.Replace(s, `"usage": {`, `"usage": {"input_tokens": 1}, "usage": {`, 1),
		strings.Replace(s, `"usage": {`, `"usage": 5, "usage": {`, 1),
		strings.Replace(s, `"provider_request_id"`, `"usage": null, "provider_request_id"`, 1),
		strings.Replace(s, `"provider_request_id"`, `"usage": [], "provider_request_id"`, 1),
		strings.Replace(s, `"provider_request_id"`, `"error": null, "provider_request_id"`, 1),
		strings.Replace(s, `"provider_request_id"`, `"error": {}, "provider_request_id"`, 1),
		strings.Replace(s, `"schema": "ledger.attempt.v1",`, ``, 1) + ` `,
		strings.Replace(s, `"schema": "ledger.attempt.v1",`, `"schema": "ledger.attempt.v1", "schema": "ledger.attempt.v2",`, 1),
		strings.Replace(s, `claude-sonnet-4-5`, "claude\nsonnet", 1),
		strings.ReplaceAll(s, "\n", "\r\n"),
		strings.ReplaceAll(s, " ", "\t"),
		strings.ReplaceAll(strings.ReplaceAll(s, "\n", ""), " ", ""),
		" \n" + s + "\n\n",
		s + "}",
		s + "x",
		s + "{}",
		"{" + s,
		s[:len(s)/2],
	}
	// Nesting: the body is depth 1, so a member holds at most 9999 nested
	// arrays and a member of usage at most 9998.
	for _, n := range []int{1, 64, 65, 9998, 9999, 10000} {
		out = append(out,
			strings.Replace(s, `"provider_request_id"`, `"deep": `+nest(n)+`, "provider_request_id"`, 1),
			strings.Replace(s, `"usage": {`, `"usage": {"deep": `+nest(n)+`, `, 1),
			strings.Replace(s, `"provider_request_id"`, `"deep": `+strings.Repeat(`{"a":`, n)+`1`+strings.Repeat(`}`, n)+`, "provider_request_id"`, 1),
		)
	}
	return out
}

// differentialSeeds are the bodies FuzzDecodeMatchesReference starts from:
// the examples, the FuzzDecode corpus, the members of both examples set to
// each seed literal or deleted, the whole bodies, the text edits, and every
// prefix of the success example.
func differentialSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var seeds [][]byte
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	entries, err := os.ReadDir(dir)
	require.NoError(tb, err)
	for _, e := range entries {
		seeds = append(seeds, corpusBody(tb, filepath.Join(dir, e.Name())))
	}
	for _, name := range []string{successFile, errorFile} {
		example := readTestdata(tb, name)
		seeds = append(seeds, example)
		for _, path := range seedPaths {
			seeds = append(seeds, mutated(tb, name, del(path)))
			for _, l := range seedLiterals {
				seeds = append(seeds, mutated(tb, name, set(path, raw(l))))
			}
		}
		for _, s := range textEdits(string(example)) {
			seeds = append(seeds, []byte(s))
		}
	}
	for _, s := range seedBodies {
		seeds = append(seeds, []byte(s))
	}
	success := readTestdata(tb, successFile)
	for i := range success {
		seeds = append(seeds, success[:i])
	}
	return seeds
}

// FuzzDecodeMatchesReference is the proof that the hand-written decoder is
// the one it replaced: for every body, Decode and refDecode (the
// encoding/json decoder, kept in reference_test.go) return the same
// attempt or the same reject, and Marshal and refMarshal the same bytes.
//
//	go test -run '^$' -fuzz FuzzDecodeMatchesReference -fuzztime 180s ./internal/events/
func FuzzDecodeMatchesReference(f *testing.F) {
	for _, s := range differentialSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		requireSameDecode(t, data)
	})
}

// TestDecodeMatchesReferenceAfterRegister checks that a registered schema
// reaches its decoder in both, and a registered schema that shadows v1
// does too.
func TestDecodeMatchesReferenceAfterRegister(t *testing.T) {
	calls := 0
	custom := func(data []byte) (*Attempt, error) {
		calls++
		return nil, rejectf(ReasonInvalidField, "custom decoder saw %d bytes", len(data))
	}
	bodies := [][]byte{
		[]byte(`{"schema":"ledger.attempt.v9","anything":[1,2,{}]}`),
		[]byte(`{"schema":"ledger.attempt\u002ev9"}`),
		[]byte(`{"schema":"ledger.attempt.v9"`),
		[]byte(`["ledger.attempt.v9"]`),
		readTestdata(t, successFile),
	}
	RegisterDecoder("ledger.attempt.v9", custom)
	t.Cleanup(func() { unregisterDecoder("ledger.attempt.v9") })
	for _, b := range bodies {
		requireSameDecode(t, b)
	}
	assert.Equal(t, 4, calls, "two bodies reach the decoder, once in each")

	v1 := decoders[SchemaV1]
	RegisterDecoder(SchemaV1, custom)
	t.Cleanup(func() { decoders[SchemaV1] = v1 })
	requireSameDecode(t, readTestdata(t, successFile))
	assert.Equal(t, 6, calls)
}

// FuzzMarshalMatchesReference holds Marshal and FormatTime to the bytes of
// encoding/json and time.Format for any attempt, valid or not: any
// strings (invalid UTF-8, control characters, HTML, U+2028), any numbers,
// any instant and zone, and labels of any strings.
func FuzzMarshalMatchesReference(f *testing.F) {
	for _, a := range []Attempt{wantSuccess(f), wantError(f)} {
		msg := ""
		if a.Error != nil {
			msg = a.Error.Message
		}
		f.Add(a.EventID, a.RequestID, a.SessionID, string(a.Outcome), a.Provider, a.Model, a.ProviderRequestID,
			"connection", msg, a.Attempt, a.Usage.InputTokens, a.Usage.OutputTokens, a.Usage.CacheReadInputTokens,
			a.Usage.CacheCreationInputTokens, 0, a.Final, true, a.Error != nil,
			a.StartedAt.Unix(), int64(a.StartedAt.Nanosecond()), a.FinishedAt.Unix(), int64(a.FinishedAt.Nanosecond()), 0, "", "")
	}
	f.Add("", "", "", "", "", "", "", "", "", -1, int64(-1), int64(1<<62), int64(0), int64(0), -600, false, false, true,
		int64(-62167219200), int64(0), int64(253402300799), int64(999999999), 5*3600+1800, "team", "search")
	f.Add("<a&b>", "\u2028\u2029", "\x00\x1f\x7f", "\"\\", "\b\f\n\r\t", "\xff\xc3", "é😀\xed\xa0\x80", "k", "m\xf4\x90\x80\x80",
		1<<40, int64(-1)<<63, int64(1)<<62, int64(7), int64(8), 599, true, true, true,
		int64(-62167219201), int64(-1), int64(253402300800), int64(1e9), -12*3600, "<k\xff>", "v\u2028&\x00")
	f.Add("a", "b", "c", "d", "e", "f", "g", "h", "i", 0, int64(0), int64(0), int64(0), int64(0), 0, false, false, false,
		int64(-1)<<40, int64(0), int64(1)<<40, int64(0), 1, "", "x")
	f.Fuzz(func(t *testing.T, eventID, requestID, sessionID, outcome, provider, model, providerRequestID, kind, message string,
		attempt int, in, out, cacheRead, cacheCreation int64, status int, final, retryable, hasError bool,
		startSec, startNsec, finishSec, finishNsec int64, offset int, labelKey, labelValue string) {
		zone := time.FixedZone("", offset%(24*3600))
		a := Attempt{
			Schema: "whatever", EventID: eventID, RequestID: requestID, SessionID: sessionID, Attempt: attempt,
			Outcome: Outcome(outcome), Final: final, Provider: provider, Model: model,
			Usage:     Usage{InputTokens: in, OutputTokens: out, CacheReadInputTokens: cacheRead, CacheCreationInputTokens: cacheCreation},
			StartedAt: time.Unix(startSec, startNsec).In(zone), FinishedAt: time.Unix(finishSec, finishNsec),
			ProviderRequestID: providerRequestID,
		}
		if hasError {
			a.Error = &AttemptError{Kind: ErrorKind(kind), Status: status, Retryable: retryable, Message: message}
		}
		if labelKey != "" || labelValue != "" {
			// Two pairs, so that their order is tested; the first may be
			// any strings, the other sorts after most of them.
			a.Labels = api.Labels{labelKey: labelValue, "m": labelValue + labelKey}
		}
		want, err := refMarshal(&a)
		require.NoError(t, err)
		got, err := Marshal(&a)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		require.Equal(t, refFormatTime(a.StartedAt), FormatTime(a.StartedAt))
		require.Equal(t, refFormatTime(a.FinishedAt), FormatTime(a.FinishedAt))
	})
}

// TestCanonicalULIDMatchesParseStrict checks the table that replaced
// ulid.ParseStrict plus String: every byte at every position of a valid
// ULID, and the lengths around 26.
func TestCanonicalULIDMatchesParseStrict(t *testing.T) {
	reference := func(id string) bool {
		parsed, err := ulid.ParseStrict(id)
		return err == nil && parsed.String() == id
	}
	for _, base := range []string{"01JH8Y5WDR3M4N5P6Q7R8S9T0V", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "00000000000000000000000000"} {
		for pos := range len(base) {
			for c := range 256 {
				id := base[:pos] + string([]byte{byte(c)}) + base[pos+1:]
				require.Equal(t, reference(id), canonicalULID(id), "%q", id)
			}
		}
		for _, id := range []string{base[1:], base + "0", base[:25] + "é", ""} {
			require.Equal(t, reference(id), canonicalULID(id), "%q", id)
		}
	}
}

// TestValidateMatchesReference runs Validate and the reference's on
// attempts that break each rule, and on both examples.
func TestValidateMatchesReference(t *testing.T) {
	edits := []func(a *Attempt){
		func(*Attempt) {},
		func(a *Attempt) { a.Schema = "" },
		func(a *Attempt) { a.EventID = "" },
		func(a *Attempt) { a.EventID = "01jh8y5wdr3m4n5p6q7r8s9t0v" },
		func(a *Attempt) { a.EventID = "8ZZZZZZZZZZZZZZZZZZZZZZZZZ" },
		func(a *Attempt) { a.EventID = "01JH8Y5WDR3M4N5P6Q7R8S9T0I" },
		func(a *Attempt) { a.EventID = strings.Repeat("é", 40) },
		func(a *Attempt) { a.RequestID = "a b" },
		func(a *Attempt) { a.SessionID = "" },
		func(a *Attempt) { a.Attempt = -1 },
		func(a *Attempt) { a.Outcome = "" },
		func(a *Attempt) { a.Final = !a.Final },
		func(a *Attempt) { a.Error = nil },
		func(a *Attempt) { a.Error = &AttemptError{Kind: "nope"} },
		func(a *Attempt) { a.Error = &AttemptError{Kind: KindOther, Status: 99} },
		func(a *Attempt) { a.Error = &AttemptError{Kind: KindOther, Message: "\xff"} },
		func(a *Attempt) { a.Provider = "\xc3" },
		func(a *Attempt) { a.Model = strings.Repeat("m", MaxModelLength+1) },
		func(a *Attempt) { a.Usage.InputTokens = -1 },
		func(a *Attempt) { a.Usage.CacheCreationInputTokens = a.Usage.InputTokens + 1 },
		func(a *Attempt) { a.StartedAt = time.Time{} },
		func(a *Attempt) { a.FinishedAt = a.StartedAt.Add(-time.Nanosecond) },
		func(a *Attempt) { a.FinishedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(a *Attempt) { a.StartedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(a *Attempt) { a.ProviderRequestID = strings.Repeat("r", MaxProviderReqID+1) },
		func(a *Attempt) { a.Labels = api.Labels{"team": "search"} },
		func(a *Attempt) { a.Labels = api.Labels{"team": ""} },
		func(a *Attempt) { a.Labels = api.Labels{"Team": "x"} },
		func(a *Attempt) { a.Labels = api.Labels{"": "x", "b": "\x00"} },
	}
	for _, base := range []Attempt{wantSuccess(t), wantError(t)} {
		for i, edit := range edits {
			a := base
			if base.Error != nil {
				e := *base.Error
				a.Error = &e
			}
			edit(&a)
			assert.Equal(t, refValidate(&a), a.Validate(), "edit %d of %s", i, base.Outcome)
		}
	}
}

// benchmarkBodies are bodies of the shapes the aggregator meets, beyond
// the two indented examples of BenchmarkDecode.
func benchmarkBodies(b *testing.B) []struct {
	name string
	data []byte
} {
	b.Helper()
	seed := func(name string) []byte {
		return corpusBody(b, filepath.Join("testdata", "fuzz", "FuzzDecode", name))
	}
	var compactError bytes.Buffer
	require.NoError(b, json.Compact(&compactError, readTestdata(b, errorFile)))
	return []struct {
		name string
		data []byte
	}{
		{"compact_success", seed("valid_success")},
		{"compact_error", compactError.Bytes()},
		{"labels", seed("valid_labels")},
		{"offset_times", seed("valid_offset_times")},
		{"unicode", seed("valid_unicode")},
		{"edge_numbers", seed("valid_edge_numbers")},
		{"reject_invalid_field", seed("invalid_field_tokens_over_max")},
		{"reject_unknown_schema", seed("unknown_schema_v2")},
		{"reject_malformed_json", seed("malformed_json_truncated")},
	}
}

// BenchmarkDecodeShapes decodes bodies beyond the examples: compact ones,
// the slow paths (offset times, escapes, exponents) and rejects.
func BenchmarkDecodeShapes(b *testing.B) {
	for _, c := range benchmarkBodies(b) {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.data)))
			for b.Loop() {
				_, _ = Decode(c.data)
			}
		})
		if c.name == "labels" {
			// As the aggregator decodes: the label set from its interner.
			b.Run(c.name+"-interned", func(b *testing.B) {
				labelSets := NewLabelInterner(0)
				b.ReportAllocs()
				b.SetBytes(int64(len(c.data)))
				for b.Loop() {
					_, _ = DecodeInterned(c.data, labelSets)
				}
			})
		}
	}
}

// BenchmarkDecodeReference is BenchmarkDecode for the reference decoder,
// so that one run on a loaded machine compares the two.
func BenchmarkDecodeReference(b *testing.B) {
	for _, name := range []string{successFile, errorFile} {
		data := readTestdata(b, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := refDecode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchmarkMarshal(b *testing.B, marshal func(*Attempt) ([]byte, error)) {
	for _, a := range []Attempt{wantSuccess(b), wantError(b)} {
		b.Run(string(a.Outcome), func(b *testing.B) {
			data, err := marshal(&a)
			require.NoError(b, err)
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := marshal(&a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMarshal(b *testing.B) { benchmarkMarshal(b, Marshal) }

func BenchmarkMarshalReference(b *testing.B) { benchmarkMarshal(b, refMarshal) }
