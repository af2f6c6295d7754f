package events

import (
	"encoding/binary"
	"math/bits"
)

// This file is the JSON scanner under Decode: a single pass over the body
// that checks the syntax exactly as encoding/json does (RFC 8259; any byte
// from 0x20 up inside strings, valid UTF-8 or not; at most maxDepth nested
// arrays and objects) and records where the value of each v1 member is,
// without building anything. The meaning of the values (types, ranges,
// UTF-8) is decided afterwards, in decode.go, in the contract's order.

// maxDepth is how deeply arrays and objects may nest, the body included:
// encoding/json's limit, so that the same bodies are malformed_json.
const maxDepth = 10000

// JSON kinds of a member's value, and their names in error details.
const (
	kindNone byte = iota // missing, or null
	kindString
	kindNumber
	kindObject
	kindArray
	kindBool
	kindNull
)

var kindNames = [...]string{
	kindNone:   "null",
	kindString: "string",
	kindNumber: "number",
	kindObject: "object",
	kindArray:  "array",
	kindBool:   "boolean",
	kindNull:   "null",
}

// Flags of a scanned value.
const (
	flagEscaped  byte = 1 << iota // a string with a backslash escape
	flagNonASCII                  // a string with a byte from 0x80 up
	flagSmallInt                  // a number of at most 18 digits, no fraction, no exponent
)

// lit is where one member's value is in the body: data[start:end], the
// whole literal (quotes included for a string). end is 0 when the member is
// missing or null; null counts as missing.
type lit struct {
	start, end int
	kind       byte
	flags      byte
}

// Members of the v1 body that the decoder reads, per object.
const (
	fSchema = iota
	fEventID
	fRequestID
	fSessionID
	fAttempt
	fOutcome
	fFinal
	fProvider
	fModel
	fUsage
	fError
	fStartedAt
	fFinishedAt
	fProviderRequestID
	fServiceTier
	fEstimatedInput
	fLabels
	nTop
)

const (
	uInput = iota
	uOutput
	uCacheRead
	uCacheCreation
	uCacheCreation1h
	uReasoning
	nUsage
)

const (
	eKind = iota
	eStatus
	eRetryable
	eMessage
	nError
)

// Which object a member name is looked up in.
const (
	levelTop = iota
	levelUsage
	levelError
)

// longestName is the length of the longest member name the decoder knows
// (cache_creation_1h_input_tokens); a longer name is an unknown member.
const longestName = 30

func topMember(name []byte) int {
	switch string(name) {
	case "schema":
		return fSchema
	case "event_id":
		return fEventID
	case "request_id":
		return fRequestID
	case "session_id":
		return fSessionID
	case "attempt":
		return fAttempt
	case "outcome":
		return fOutcome
	case "final":
		return fFinal
	case "provider":
		return fProvider
	case "model":
		return fModel
	case "usage":
		return fUsage
	case "error":
		return fError
	case "started_at":
		return fStartedAt
	case "finished_at":
		return fFinishedAt
	case "provider_request_id":
		return fProviderRequestID
	case "service_tier":
		return fServiceTier
	case "estimated_input_tokens":
		return fEstimatedInput
	case "labels":
		return fLabels
	}
	return -1
}

func usageMember(name []byte) int {
	switch string(name) {
	case "input_tokens":
		return uInput
	case "output_tokens":
		return uOutput
	case "cache_read_input_tokens":
		return uCacheRead
	case "cache_creation_input_tokens":
		return uCacheCreation
	case "cache_creation_1h_input_tokens":
		return uCacheCreation1h
	case "reasoning_tokens":
		return uReasoning
	}
	return -1
}

func errorMember(name []byte) int {
	switch string(name) {
	case "kind":
		return eKind
	case "status":
		return eStatus
	case "retryable":
		return eRetryable
	case "message":
		return eMessage
	}
	return -1
}

// eventBody is a scanned event body: where the last occurrence of each member
// the v1 decoder reads is.
type eventBody struct {
	data  []byte
	top   [nTop]lit
	usage [nUsage]lit // the members of the last "usage" object
	err   [nError]lit // the members of the last "error" object
	// labelSets, when not nil, interns the labels (DecodeInterned).
	labelSets *LabelInterner
}

// scan reads data, which must be exactly one JSON object with optional
// whitespace around it. It returns false when it is not: the body is then
// malformed_json, and encoding/json words why.
func (b *eventBody) scan(data []byte) bool {
	b.data = data
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = b.object(i, 1, levelTop)
	return i >= 0 && skipWS(data, i) == len(data)
}

// object scans the object that opens at data[i], at nesting depth depth,
// recording its members for level. It returns the index after the closing
// brace, or -1 when the syntax is wrong.
func (b *eventBody) object(i, depth, level int) int {
	data := b.data
	var slots []lit
	switch level {
	case levelTop:
		slots = b.top[:]
	case levelUsage:
		b.usage = [nUsage]lit{} // a later "usage" replaces an earlier one whole
		slots = b.usage[:]
	default:
		b.err = [nError]lit{}
		slots = b.err[:]
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return -1
		}
		end, flags := scanString(data, i)
		if end < 0 {
			return -1
		}
		f := member(data[i+1:end-1], flags, level)
		i = skipWS(data, end)
		if i >= len(data) || data[i] != ':' {
			return -1
		}
		i = skipWS(data, i+1)
		if i >= len(data) {
			return -1
		}
		start := i
		var kind, vflags byte
		if level == levelTop && (f == fUsage || f == fError) && data[i] == '{' {
			nested := levelUsage
			if f == fError {
				nested = levelError
			}
			i, kind = b.object(i, depth+1, nested), kindObject
		} else if data[i] == '"' {
			i, vflags = scanString(data, i)
			kind = kindString
		} else {
			i, kind, vflags = scanValue(data, i, depth)
		}
		if i < 0 {
			return -1
		}
		if f >= 0 {
			if kind == kindNull {
				slots[f] = lit{}
			} else {
				slots[f] = lit{start: start, end: i, kind: kind, flags: vflags}
			}
		}
		i = skipWS(data, i)
		if i >= len(data) {
			return -1
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
}

// member returns the index of the member whose name literal holds raw
// (without the quotes), or -1 for a member the decoder does not read.
func member(raw []byte, flags byte, level int) int {
	name := raw
	var buf [longestName]byte
	if flags&flagEscaped != 0 {
		var ok bool
		if name, ok = unescapeName(buf[:0], raw); !ok {
			return -1
		}
	} else if flags&flagNonASCII != 0 {
		return -1 // every known name is ASCII
	}
	switch level {
	case levelTop:
		return topMember(name)
	case levelUsage:
		return usageMember(name)
	}
	return errorMember(name)
}

// unescapeName decodes a member name with escapes into buf, as far as
// matching it against the known names goes: ok is false when it decodes
// to anything but ASCII or is longer than every known name.
func unescapeName(buf, raw []byte) ([]byte, bool) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '\\' && i+1 < len(raw) {
			i++
			switch raw[i] {
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'u':
				if i+4 >= len(raw) {
					return nil, false
				}
				r := hex4(raw[i+1 : i+5])
				if r >= 0x80 {
					return nil, false
				}
				c = byte(r)
				i += 4
			default:
				c = raw[i] // '"', '\\' or '/'
			}
		} else if c >= 0x80 {
			return nil, false
		}
		if len(buf) == cap(buf) {
			return nil, false
		}
		buf = append(buf, c)
	}
	return buf, true
}

// skipWS returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipWS(data []byte, i int) int {
	for ; i < len(data); i++ {
		// Every byte that may follow whitespace is above ' '.
		if c := data[i]; c > ' ' || c != ' ' && c != '\n' && c != '\t' && c != '\r' {
			return i
		}
	}
	return i
}

// plain marks the bytes that stand for themselves in a JSON string and
// need no attention: 0x20 to 0x7f except '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// special8 marks the bytes of x (eight bytes of a string, the first in
// the lowest bits) that need attention: a quote, a backslash, a control
// character or a byte from 0x80 up. The high bit of each such byte is set;
// a byte after (above) a marked one may be marked too, never one before,
// so the lowest mark is the first byte that needs attention.
func special8(x uint64) uint64 {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	return ((x - ones*0x20) | (quote-ones)&^quote | (backslash-ones)&^backslash | x) & highs
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanString scans the string literal that opens at data[i]. It returns
// the index after the closing quote, or -1, and whether the literal has
// escapes or non-ASCII bytes.
func scanString(data []byte, i int) (int, byte) {
	var flags byte
	i++
	for {
		// Find the next byte that needs attention, eight at a time.
		if i+8 <= len(data) {
			m := special8(binary.LittleEndian.Uint64(data[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		} else {
			for i < len(data) && plain[data[i]] {
				i++
			}
			if i >= len(data) {
				return -1, 0
			}
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1, flags
		case c == '\\':
			flags |= flagEscaped
			if i+1 >= len(data) {
				return -1, 0
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) || !isHex(data[i+2]) || !isHex(data[i+3]) || !isHex(data[i+4]) || !isHex(data[i+5]) {
					return -1, 0
				}
				i += 6
			default:
				return -1, 0
			}
		case c < 0x20:
			return -1, 0
		default:
			flags |= flagNonASCII
			i++
		}
	}
}

// scanNumber scans the number literal that starts at data[i] ('-' or a
// digit). It returns the index after it, or -1, and flagSmallInt when it
// is a plain integer that fits an int64 without a check.
func scanNumber(data []byte, i int) (int, byte) {
	start := i
	if data[i] == '-' {
		i++
		start++
	}
	if i >= len(data) {
		return -1, 0
	}
	switch c := data[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		i++
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	default:
		return -1, 0
	}
	var flags byte
	if i-start <= 18 {
		flags = flagSmallInt
	}
	if i < len(data) && data[i] == '.' {
		flags = 0
		i++
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			return -1, 0
		}
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		flags = 0
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			return -1, 0
		}
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	}
	return i, flags
}

// hasWord reports whether data has the literal word at i.
func hasWord(data []byte, i int, word string) bool {
	return len(data)-i >= len(word) && string(data[i:i+len(word)]) == word
}

// scanScalar scans the string, number, true, false or null that starts at
// data[i]. It returns the index after it, or -1.
func scanScalar(data []byte, i int) (int, byte, byte) {
	switch c := data[i]; {
	case c == '"':
		end, flags := scanString(data, i)
		return end, kindString, flags
	case c == '-' || c >= '0' && c <= '9':
		end, flags := scanNumber(data, i)
		return end, kindNumber, flags
	case c == 't' && hasWord(data, i, "true"):
		return i + 4, kindBool, 0
	case c == 'f' && hasWord(data, i, "false"):
		return i + 5, kindBool, 0
	case c == 'n' && hasWord(data, i, "null"):
		return i + 4, kindNull, 0
	}
	return -1, 0, 0
}

// scanValue scans any value that starts at data[i], inside a container at
// nesting depth depth. It returns the index after it, or -1, its kind and
// flags.
func scanValue(data []byte, i, depth int) (int, byte, byte) {
	switch data[i] {
	case '{':
		return skipContainer(data, i, depth), kindObject, 0
	case '[':
		return skipContainer(data, i, depth), kindArray, 0
	}
	return scanScalar(data, i)
}

// skipContainer checks the array or object that opens at data[i], inside
// a container at nesting depth depth, without recursion. It returns the
// index after it, or -1.
func skipContainer(data []byte, i, depth int) int {
	const (
		open  = iota // data[i] opens an array or object
		name         // data[i] should open a member name
		value        // data[i] should start a value
		after        // a value ended just before i
	)
	var buf [32]bool
	stack := buf[:0] // true for an object, false for an array
	state := open
	for {
		switch state {
		case open:
			if depth+len(stack) >= maxDepth {
				return -1
			}
			obj := data[i] == '{'
			stack = append(stack, obj)
			if i = skipWS(data, i+1); i >= len(data) {
				return -1
			}
			switch {
			case obj && data[i] == '}', !obj && data[i] == ']':
				i++
				if stack = stack[:len(stack)-1]; len(stack) == 0 {
					return i
				}
				state = after
			case obj:
				state = name
			default:
				state = value
			}
		case name:
			if data[i] != '"' {
				return -1
			}
			if i, _ = scanString(data, i); i < 0 {
				return -1
			}
			if i = skipWS(data, i); i >= len(data) || data[i] != ':' {
				return -1
			}
			if i = skipWS(data, i+1); i >= len(data) {
				return -1
			}
			state = value
		case value:
			if c := data[i]; c == '{' || c == '[' {
				state = open
				continue
			}
			if i, _, _ = scanScalar(data, i); i < 0 {
				return -1
			}
			state = after
		default: // after
			if i = skipWS(data, i); i >= len(data) {
				return -1
			}
			obj := stack[len(stack)-1]
			switch c := data[i]; {
			case c == ',':
				if i = skipWS(data, i+1); i >= len(data) {
					return -1
				}
				state = value
				if obj {
					state = name
				}
			case obj && c == '}', !obj && c == ']':
				i++
				if stack = stack[:len(stack)-1]; len(stack) == 0 {
					return i
				}
			default:
				return -1
			}
		}
	}
}
