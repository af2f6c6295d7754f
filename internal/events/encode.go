package events

import (
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agentledger/ledger/api"
)

// TimeLayout is how the contract writes times: RFC 3339 in UTC with
// nanoseconds.
const TimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// FormatTime writes t the contract's way.
func FormatTime(t time.Time) string { return string(appendTime(make([]byte, 0, len(TimeLayout)), t)) }

// AppendTime appends t the contract's way (as FormatTime), without quotes.
func AppendTime(b []byte, t time.Time) []byte { return appendTime(b, t) }

// AppendString appends s as a JSON string literal, escaped exactly as
// json.Marshal escapes it.
func AppendString(b []byte, s string) []byte { return appendString(b, s) }

// AppendUsage appends u as the contract's JSON object, field order as
// json.Marshal writes it.
func AppendUsage(b []byte, u Usage) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokens, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, u.OutputTokens, 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, u.CacheReadInputTokens, 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, u.CacheCreationInputTokens, 10)
	if u.CacheCreation1hInputTokens != 0 {
		b = append(b, `,"cache_creation_1h_input_tokens":`...)
		b = strconv.AppendInt(b, u.CacheCreation1hInputTokens, 10)
	}
	if u.ReasoningTokens != 0 {
		b = append(b, `,"reasoning_tokens":`...)
		b = strconv.AppendInt(b, u.ReasoningTokens, 10)
	}
	return append(b, '}')
}

// appendTime appends t.UTC().Format(TimeLayout) to b.
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, TimeLayout)
	}
	hour, minute, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond(), 9)
	return append(b, 'Z')
}

// appendDigits appends the width lowest decimal digits of n ≥ 0, with
// leading zeros.
func appendDigits(b []byte, n, width int) []byte {
	var buf [9]byte
	for i := width - 1; i >= 0; i-- {
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, buf[:width]...)
}

// Marshal encodes an attempt as v1 JSON. It does not validate; Validate
// does. It always writes schema SchemaV1, whatever a.Schema holds: the
// layout it writes is v1's, so an attempt decoded from a newer layout is
// written back as a v1 event that decodes to the same attempt.
//
// The bytes are exactly those encoding/json writes for the v1 layout
// (members in the contract's order, no spaces, strings escaped the way
// json.Marshal escapes them, error, an empty provider_request_id or
// service_tier, a zero estimated_input_tokens, empty labels and zero usage
// subsets omitted; labels with their keys sorted); the error is always nil.
func Marshal(a *Attempt) ([]byte, error) {
	n := 400 + len(a.EventID) + len(a.RequestID) + len(a.SessionID) + len(a.Outcome) +
		len(a.Provider) + len(a.Model) + len(a.ProviderRequestID) + len(a.ServiceTier)
	for k, v := range a.Labels {
		n += len(k) + len(v) + 6
	}
	if a.Error != nil {
		n += 64 + len(a.Error.Kind) + len(a.Error.Message)
	}
	b := make([]byte, 0, n)
	b = append(b, `{"schema":"`+SchemaV1+`","event_id":`...)
	b = appendString(b, a.EventID)
	b = append(b, `,"request_id":`...)
	b = appendString(b, a.RequestID)
	b = append(b, `,"session_id":`...)
	b = appendString(b, a.SessionID)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(a.Attempt), 10)
	b = append(b, `,"outcome":`...)
	b = appendString(b, string(a.Outcome))
	b = append(b, `,"final":`...)
	b = strconv.AppendBool(b, a.Final)
	b = append(b, `,"provider":`...)
	b = appendString(b, a.Provider)
	b = append(b, `,"model":`...)
	b = appendString(b, a.Model)
	b = append(b, `,"usage":`...)
	b = AppendUsage(b, a.Usage)
	if e := a.Error; e != nil {
		b = append(b, `,"error":{"kind":`...)
		b = appendString(b, string(e.Kind))
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(e.Status), 10)
		b = append(b, `,"retryable":`...)
		b = strconv.AppendBool(b, e.Retryable)
		b = append(b, `,"message":`...)
		b = appendString(b, e.Message)
		b = append(b, '}')
	}
	b = append(b, `,"started_at":"`...)
	b = appendTime(b, a.StartedAt) // only digits and -:.TZ: nothing to escape
	b = append(b, `","finished_at":"`...)
	b = appendTime(b, a.FinishedAt)
	b = append(b, '"')
	if a.ProviderRequestID != "" {
		b = append(b, `,"provider_request_id":`...)
		b = appendString(b, a.ProviderRequestID)
	}
	if a.ServiceTier != "" {
		b = append(b, `,"service_tier":`...)
		b = appendString(b, a.ServiceTier)
	}
	if a.EstimatedInputTokens != 0 {
		b = append(b, `,"estimated_input_tokens":`...)
		b = strconv.AppendInt(b, a.EstimatedInputTokens, 10)
	}
	if len(a.Labels) != 0 {
		b = append(b, `,"labels":`...)
		b = AppendLabels(b, a.Labels)
	}
	return append(b, '}'), nil
}

// AppendLabels appends l as the contract's JSON object, keys sorted and
// strings escaped as json.Marshal writes a map[string]string.
func AppendLabels(b []byte, l api.Labels) []byte {
	var buf [api.MaxLabels]string
	keys := buf[:0]
	for k := range l {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, l[k])
	}
	return append(b, '}')
}

// jsonSafe marks the ASCII bytes that json.Marshal writes as they are: not
// control characters, '"', '\\', nor (HTML-safe escaping) '<', '>', '&'.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string literal escaped exactly as
// json.Marshal escapes it: \" \\ \b \f \n \r \t, \u00XX for other control
// characters and for < > &, \ufffd for each invalid UTF-8 byte, \u2028 and
// \u2029 for the line and paragraph separators.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
