package topology

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
)

// Difference is a setting of an existing stream or bucket that differs
// from what a process asked for. JetStream keeps the existing setting:
// Ensure* never changes a resource that exists.
type Difference struct {
	// Resource names the stream (LEDGER_ATTEMPTS) or bucket
	// (ledger_requests).
	Resource string
	// Setting is the setting's name: "replicas", "duplicate window",
	// "max age".
	Setting string
	// Want is the value asked for, Have the one the resource has.
	Want, Have string
	// Fix is the nats CLI command that changes the resource to Want.
	Fix string
	// Breaks is set when the setting breaks the ledger's rules (see
	// Compare): processes refuse to start on it (EnsureBucket returns a
	// *SettingsError). Otherwise the difference is only warned about.
	Breaks bool
	// Why says what the setting does to the ledger, when it matters.
	Why string
}

func (d Difference) String() string {
	why := ""
	if d.Why != "" {
		why = ": " + d.Why
	}
	if d.Breaks {
		return fmt.Sprintf("%s has %s %s, which the ledger cannot run with (it needs %s)%s; fix it with: %s",
			d.Resource, d.Setting, d.Have, d.Want, why, d.Fix)
	}
	return fmt.Sprintf("%s has %s %s, not the %s asked for%s; JetStream keeps %s (to change it: %s)",
		d.Resource, d.Setting, d.Have, d.Want, why, d.Have, d.Fix)
}

// ErrBucketSettings is matched (errors.Is) by every *SettingsError.
var ErrBucketSettings = errors.New("topology: a ledger bucket's settings break the ledger's rules")

// SettingsError lists the settings of a ledger bucket that break the
// ledger's rules, each with the command that fixes it.
type SettingsError struct {
	Diffs []Difference
}

func (e *SettingsError) Error() string {
	parts := make([]string, len(e.Diffs))
	for i, d := range e.Diffs {
		parts[i] = d.String()
	}
	return "topology: refusing to start: " + strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrBucketSettings) true.
func (e *SettingsError) Is(target error) bool { return target == ErrBucketSettings }

// Breaking returns the differences that break the ledger's rules as a
// *SettingsError, or nil when there are none.
func Breaking(diffs []Difference) error {
	var out []Difference
	for _, d := range diffs {
		if d.Breaks {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &SettingsError{Diffs: out}
}

// maxRecordBytes is the largest record the projection writes (a request
// record, projection.MaxRequestRecordBytes) with its headers: a bucket
// whose max value size is below it refuses the largest records.
const maxRecordBytes = 704<<10 + 4<<10

// Compare reports the settings of have, an existing stream's
// configuration, that differ from those want asks for. It compares only
// what want sets: a zero field of want has no opinion (a process that did
// not ask for 3 replicas does not warn about them). The settings compared
// depend on the stream: replicas for every stream and bucket; the
// duplicate window for LEDGER_ATTEMPTS and LEDGER_REJECTED; the max age
// for LEDGER_ATTEMPTS. A KV bucket is given as its stream (KV_<bucket>);
// it is one of the ledger's record buckets (EnsureBucket's), whose
// settings are the ledger's rules whatever want says:
//
//   - TTL none: a record that expires is counted again by the next event
//     of its request (and a session, a checkpoint or a lease that
//     expires breaks exactly-once). Breaks.
//   - history 1: readers (verify) take every message of the bucket's
//     stream for a key's current value. Breaks.
//   - file storage: a memory bucket loses its records when the server
//     restarts. Warned.
//   - max value size unlimited: a smaller one refuses the largest
//     records, and the aggregator stalls on them. Warned.
//
// Compare is pure.
func Compare(want Config, have jetstream.StreamConfig) []Difference {
	resource, edit := have.Name, "nats stream edit "+have.Name
	isBucket := strings.HasPrefix(have.Name, "KV_")
	if isBucket {
		resource = strings.TrimPrefix(have.Name, "KV_")
	}
	var out []Difference
	add := func(setting, want, have, flag string) {
		out = append(out, Difference{Resource: resource, Setting: setting, Want: want, Have: have, Fix: edit + " " + flag})
	}
	if want.Replicas != 0 && want.Replicas != max(have.Replicas, 1) {
		add("replicas", fmt.Sprint(want.Replicas), fmt.Sprint(max(have.Replicas, 1)), fmt.Sprintf("--replicas %d", want.Replicas))
	}
	if isBucket {
		return append(out, compareBucket(resource, have)...)
	}
	if want.DuplicateWindow != 0 && want.DuplicateWindow != have.Duplicates {
		add("duplicate window", want.DuplicateWindow.String(), have.Duplicates.String(), "--dupe-window "+want.DuplicateWindow.String())
	}
	if have.Name == names.AttemptsStream && want.MaxAge != 0 && want.MaxAge != have.MaxAge {
		add("max age", want.MaxAge.String(), ageString(have.MaxAge), "--max-age "+want.MaxAge.String())
	}
	return out
}

// compareBucket checks a record bucket's settings against the ledger's
// rules (see Compare).
func compareBucket(bucket string, have jetstream.StreamConfig) []Difference {
	edit := "nats stream edit KV_" + bucket
	var out []Difference
	if have.MaxAge != 0 {
		out = append(out, Difference{Resource: bucket, Setting: "TTL", Want: "none", Have: have.MaxAge.String(),
			Fix: edit + " --max-age 0", Breaks: true,
			Why: "records would expire, and the next event of an expired request would count it again"})
	}
	if have.MaxMsgsPerSubject != 1 {
		out = append(out, Difference{Resource: bucket, Setting: "history", Want: "1", Have: historyString(have.MaxMsgsPerSubject),
			Fix: edit + " --max-msgs-per-subject 1", Breaks: true,
			Why: "readers take every message of the bucket for a key's current value"})
	}
	if have.Storage != jetstream.FileStorage {
		out = append(out, Difference{Resource: bucket, Setting: "storage", Want: "file", Have: have.Storage.String(),
			Fix: "recreate it: `nats kv del " + bucket + "`, then start the aggregator and run `aggregator rebuild`",
			Why: "a memory bucket loses its records when the server restarts"})
	}
	if have.MaxMsgSize > 0 {
		why := "a limit the ledger does not set"
		if have.MaxMsgSize < maxRecordBytes {
			why = fmt.Sprintf("below %d bytes, the largest record the ledger writes: the aggregator stalls on such a record", maxRecordBytes)
		}
		out = append(out, Difference{Resource: bucket, Setting: "max value size", Want: "unlimited", Have: fmt.Sprint(have.MaxMsgSize),
			Fix: edit + " --max-msg-size -1", Why: why})
	}
	return out
}

func historyString(n int64) string {
	if n <= 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

func ageString(d time.Duration) string {
	if d == 0 {
		return "unlimited"
	}
	return d.String()
}

// Check compares the ledger's streams and buckets that exist with want,
// and returns every difference (see Compare). Resources that do not exist
// yet are skipped: whoever creates them creates them as asked. buckets are
// the KV buckets to look at besides the streams.
func Check(ctx context.Context, js jetstream.JetStream, want Config, buckets ...string) ([]Difference, error) {
	names := []string{names.AttemptsStream, names.RejectedStream}
	for _, b := range buckets {
		names = append(names, "KV_"+b)
	}
	var out []Difference
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("topology: looking up %s: %w", name, err)
		}
		out = append(out, Compare(want, s.CachedInfo().Config)...)
	}
	return out, nil
}
