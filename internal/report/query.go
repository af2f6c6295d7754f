package report

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentledger/ledger/api"
)

// Kind is what a dimension of --by groups by.
type Kind int

// The dimensions of --by.
const (
	ByModel    Kind = iota + 1 // the model of the request's first accepted event
	ByProvider                 // its provider
	ByLabel                    // the value of one label key; "(none)" without it
	ByHour                     // the UTC hour of the request's cell
	ByDay                      // the UTC day of the request's cell
	BySession                  // the session (whole life: ledger_sessions)
	ByRequest                  // the request (scans every request record)
)

var kindNames = map[Kind]string{ByModel: "model", ByProvider: "provider", ByLabel: "label", ByHour: "hour",
	ByDay: "day", BySession: "session", ByRequest: "request"}

// Dimension is one dimension of --by: a kind, and the label key of
// ByLabel.
type Dimension struct {
	Kind Kind
	Key  string
}

// String is the dimension as --by spells it, which is also its column
// name in --json and --csv: "model", "label:team", "day".
func (d Dimension) String() string {
	if d.Kind == ByLabel {
		return "label:" + d.Key
	}
	return kindNames[d.Kind]
}

// timed reports whether d is a time dimension.
func (d Dimension) timed() bool { return d.Kind == ByHour || d.Kind == ByDay }

// Sort is the order of --sort: descending by one measure.
type Sort string

// The orders of --sort. SortNone is the order of the dimensions (time in
// time order, names in byte order, "(none)" last).
const (
	SortNone     Sort = ""
	SortOverhead Sort = "overhead" // overhead $ (billed cost - usage cost), then overhead tokens
	SortBilled   Sort = "billed"   // billed tokens (input + output)
	SortCost     Sort = "cost"     // billed $ (every attempt at its own price)
	SortRequests Sort = "requests" // requests
)

// MaxDimensions is the most dimensions one --by may name.
const MaxDimensions = 8

// NoLabel is how the table shows a cell without the label key of a
// label:KEY dimension (JSON shows null and CSV an empty field: a label
// value is never empty).
const NoLabel = "(none)"

// Source is the records a query reads.
type Source string

// The sources of a query.
const (
	// FromRollups reads bucket ledger_rollups: one record per cell (hour,
	// provider, model, labels), whatever the number of requests.
	FromRollups Source = "rollups"
	// FromSessions reads bucket ledger_sessions: the whole life of each
	// session.
	FromSessions Source = "sessions"
	// FromRequests scans every record of bucket ledger_requests.
	FromRequests Source = "requests"
)

// Query is a report by dimension and time: --by, --since, --until, --top,
// --sort.
type Query struct {
	By []Dimension
	// Since (inclusive) and Until (exclusive) select cells by their hour;
	// zero is open. Both are whole UTC hours.
	Since, Until time.Time
	// Top keeps the first Top rows of the order; 0 keeps all.
	Top  int
	Sort Sort
}

// QueryError says which flag breaks which rule.
type QueryError struct {
	Flag  string // "--by", "--since", ...
	Value string // what was given
	Rule  string
}

func (e *QueryError) Error() string {
	if e.Value == "" {
		return e.Flag + ": " + e.Rule
	}
	return fmt.Sprintf("%s %q: %s", e.Flag, e.Value, e.Rule)
}

// ParseBy reads the value of --by: dimensions separated by commas, e.g.
// "label:team,day". It checks each name and label key; Query.Validate
// checks the combination.
func ParseBy(s string) ([]Dimension, error) {
	var dims []Dimension
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if key, ok := strings.CutPrefix(part, "label:"); ok {
			if err := (api.Labels{key: "x"}).Validate(); err != nil {
				var le *api.LabelError
				errors.As(err, &le)
				return nil, &QueryError{Flag: "--by", Value: part, Rule: "the label " + le.Rule}
			}
			dims = append(dims, Dimension{Kind: ByLabel, Key: key})
			continue
		}
		if part == "" {
			return nil, &QueryError{Flag: "--by", Rule: "an empty dimension; want model, provider, label:KEY, session, hour, day or request, separated by commas"}
		}
		d, ok := Dimension{}, false
		for k, name := range kindNames {
			if k != ByLabel && name == part {
				d, ok = Dimension{Kind: k}, true
			}
		}
		if !ok {
			return nil, &QueryError{Flag: "--by", Value: part,
				Rule: "unknown dimension; want model, provider, label:KEY, session, hour, day or request, separated by commas"}
		}
		dims = append(dims, d)
	}
	return dims, nil
}

// ParseSort reads the value of --sort.
func ParseSort(s string) (Sort, error) {
	switch o := Sort(s); o {
	case SortNone, SortOverhead, SortBilled, SortCost, SortRequests:
		return o, nil
	}
	return "", &QueryError{Flag: "--sort", Value: s, Rule: "want overhead, billed, cost or requests"}
}

// ParseTime reads the value of --since or --until (named by flag): a date
// (2026-12-04, its midnight UTC) or an RFC 3339 time on a whole UTC hour
// (2026-12-04T15:00:00Z, or with an offset that lands on one): the
// rollups are per UTC hour, so a time within an hour has no answer.
func ParseTime(flag, s string) (time.Time, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		if t, err = time.Parse(time.RFC3339, s); err != nil {
			return time.Time{}, &QueryError{Flag: flag, Value: s,
				Rule: "want a date such as 2026-12-04 (midnight UTC) or an RFC 3339 time such as 2026-12-04T15:00:00Z"}
		}
	}
	t = t.UTC()
	if !t.Equal(t.Truncate(time.Hour)) {
		return time.Time{}, &QueryError{Flag: flag, Value: s,
			Rule: fmt.Sprintf("the rollups are per UTC hour: give a whole hour, such as %s", t.Truncate(time.Hour).Format(time.RFC3339))}
	}
	return t, nil
}

// Validate checks the combination of q's flags: at least one dimension,
// none twice, hour or day but not both; session (whole life) with no
// other dimension and no --since/--until unless request is given too
// (then every request record is scanned); --top not negative; --since
// before --until, both whole UTC hours.
func (q Query) Validate() error {
	if len(q.By) == 0 {
		return &QueryError{Flag: "--by", Rule: "name at least one dimension"}
	}
	if len(q.By) > MaxDimensions {
		return &QueryError{Flag: "--by", Rule: fmt.Sprintf("at most %d dimensions, got %d", MaxDimensions, len(q.By))}
	}
	seen := map[Dimension]bool{}
	timed, request, session := "", false, false
	for _, d := range q.By {
		if seen[d] {
			return &QueryError{Flag: "--by", Value: d.String(), Rule: "named twice"}
		}
		seen[d] = true
		if d.timed() {
			if timed != "" {
				return &QueryError{Flag: "--by", Rule: "hour and day: give one of them"}
			}
			timed = d.String()
		}
		request = request || d.Kind == ByRequest
		session = session || d.Kind == BySession
	}
	if session && !request {
		switch {
		case len(q.By) > 1:
			return &QueryError{Flag: "--by", Rule: "session reads the session records, each a total over the session's whole life, without hour, day, model, provider or labels: it combines with no other dimension; --by request," + dimList(q.By) + " scans every request record and can"}
		case !q.Since.IsZero() || !q.Until.IsZero():
			return &QueryError{Flag: "--by", Rule: "session reads the session records, each a total over the session's whole life: it cannot take --since or --until; --by request,session with them scans every request record and can"}
		}
	}
	if q.Top < 0 {
		return &QueryError{Flag: "--top", Value: fmt.Sprint(q.Top), Rule: "want 0 (every row) or more"}
	}
	if _, err := ParseSort(string(q.Sort)); err != nil {
		return err
	}
	for _, b := range []struct {
		flag string
		t    time.Time
	}{{"--since", q.Since}, {"--until", q.Until}} {
		if !b.t.IsZero() && (b.t.Location() != time.UTC || !b.t.Equal(b.t.Truncate(time.Hour))) {
			return &QueryError{Flag: b.flag, Value: b.t.String(), Rule: "want a whole UTC hour"}
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return &QueryError{Flag: "--since", Value: q.Since.Format(time.RFC3339),
			Rule: fmt.Sprintf("must be before --until %s (--since is inclusive, --until exclusive)", q.Until.Format(time.RFC3339))}
	}
	return nil
}

// Source is the records q reads: the request records when it names
// request, the session records when it names session, else the rollups.
func (q Query) Source() Source {
	src := FromRollups
	for _, d := range q.By {
		switch d.Kind {
		case ByRequest:
			return FromRequests
		case BySession:
			src = FromSessions
		}
	}
	return src
}

// in reports whether hour is in [Since, Until).
func (q Query) in(hour time.Time) bool {
	return (q.Since.IsZero() || !hour.Before(q.Since)) && (q.Until.IsZero() || hour.Before(q.Until))
}

func dimList(ds []Dimension) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	return strings.Join(s, ",")
}
