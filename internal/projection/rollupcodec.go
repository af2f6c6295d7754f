package projection

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
)

// UnmarshalJSON reads a stored rollup. The layout Rollup.appendJSON
// writes is read member by member without reflection (ReadRollups reads
// tens of thousands at once, and encoding/json was most of its time);
// anything else, a string with an escape included, is left to
// encoding/json.
func (c *Rollup) UnmarshalJSON(data []byte) error {
	*c = Rollup{}
	if fastRollup(data, c) {
		return nil
	}
	*c = Rollup{}
	type plain Rollup // without this method
	return json.Unmarshal(data, (*plain)(c))
}

// errSlow sends a record to encoding/json.
var errSlow = errors.New("not the plain layout")

// scanner reads the plain JSON appendJSON writes: no white space, strings
// without escapes.
type scanner struct {
	b   []byte
	i   int
	err error
}

func (s *scanner) next(ch byte) bool {
	if s.err == nil && s.i < len(s.b) && s.b[s.i] == ch {
		s.i++
		return true
	}
	return false
}

func (s *scanner) expect(ch byte) {
	if !s.next(ch) {
		s.err = errSlow
	}
}

func (s *scanner) str() string {
	s.expect('"')
	if s.err != nil {
		return ""
	}
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return string(s.b[start : s.i-1])
		case c == '\\' || c < 0x20:
			s.err = errSlow
			return ""
		}
		s.i++
	}
	s.err = errSlow
	return ""
}

func (s *scanner) int() int64 {
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	if err != nil && s.err == nil {
		s.err = errSlow
	}
	return n
}

// object calls member with each member's key, the scanner at its value.
func (s *scanner) object(member func(key string)) {
	s.expect('{')
	if s.next('}') {
		return
	}
	for s.err == nil {
		key := s.str()
		s.expect(':')
		if s.err != nil {
			return
		}
		member(key)
		if s.next(',') {
			continue
		}
		s.expect('}')
		return
	}
}

func (s *scanner) usage(u *events.Usage) {
	s.object(func(key string) {
		switch key {
		case "input_tokens":
			u.InputTokens = s.int()
		case "output_tokens":
			u.OutputTokens = s.int()
		case "cache_read_input_tokens":
			u.CacheReadInputTokens = s.int()
		case "cache_creation_input_tokens":
			u.CacheCreationInputTokens = s.int()
		case "cache_creation_1h_input_tokens":
			u.CacheCreation1hInputTokens = s.int()
		case "reasoning_tokens":
			u.ReasoningTokens = s.int()
		default:
			s.err = errSlow
		}
	})
}

// fastRollup reads data in the plain layout into c; false when data is
// not in it.
func fastRollup(data []byte, c *Rollup) bool {
	s := &scanner{b: data}
	t := &c.Totals
	ints := func(key string) *int64 {
		switch key {
		case "requests":
			return &t.Requests
		case "succeeded":
			return &t.Succeeded
		case "failed":
			return &t.Failed
		case "pending":
			return &t.Pending
		case "attempts":
			return &t.Attempts
		case "estimated_input_tokens":
			return &t.EstimatedInputTokens
		case "usage_cost":
			return (*int64)(&t.UsageCost)
		case "billed_cost":
			return (*int64)(&t.BilledCost)
		case "unpriced_usage_tokens":
			return &t.UnpricedUsageTokens
		case "unpriced_billed_tokens":
			return &t.UnpricedBilledTokens
		case "label_conflicts":
			return &t.LabelConflicts
		}
		return nil
	}
	s.object(func(key string) {
		if p := ints(key); p != nil {
			*p = s.int()
			return
		}
		switch key {
		case "grain":
			if err := c.Grain.UnmarshalText([]byte(s.str())); err != nil {
				s.err = errSlow
			}
		case "hour":
			h, err := time.Parse(time.RFC3339Nano, s.str())
			if err != nil {
				s.err = errSlow
			}
			c.Hour = h
		case "provider":
			c.Provider = s.str()
		case "model":
			c.Model = s.str()
		case "labels":
			c.Labels = api.Labels{}
			s.object(func(k string) { c.Labels[k] = s.str() })
		case "usage":
			s.usage(&t.Usage)
		case "billed":
			s.usage(&t.Billed)
		case "saturated":
			switch {
			case s.i+4 <= len(s.b) && string(s.b[s.i:s.i+4]) == "true":
				t.Saturated, s.i = true, s.i+4
			case s.i+5 <= len(s.b) && string(s.b[s.i:s.i+5]) == "false":
				s.i += 5
			default:
				s.err = errSlow
			}
		case "seq":
			c.Seq = uint64(s.int())
		case "rules":
			c.Rules = int(s.int())
		default:
			s.err = errSlow
		}
	})
	return s.err == nil && s.i == len(s.b)
}
