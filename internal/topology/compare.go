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
}

func (d Difference) String() string {
	return fmt.Sprintf("%s has %s %s, not the %s asked for; JetStream keeps %s (to change it: %s)",
		d.Resource, d.Setting, d.Have, d.Want, d.Have, d.Fix)
}

// Compare reports the settings of have, an existing stream's
// configuration, that differ from those want asks for. It compares only
// what want sets: a zero field of want has no opinion (a process that did
// not ask for 3 replicas does not warn about them). The settings compared
// depend on the stream: replicas for every stream and bucket; the
// duplicate window for LEDGER_ATTEMPTS and LEDGER_REJECTED; the max age
// for LEDGER_ATTEMPTS. A KV bucket is given as its stream (KV_<bucket>).
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
		return out
	}
	if want.DuplicateWindow != 0 && want.DuplicateWindow != have.Duplicates {
		add("duplicate window", want.DuplicateWindow.String(), have.Duplicates.String(), "--dupe-window "+want.DuplicateWindow.String())
	}
	if have.Name == names.AttemptsStream && want.MaxAge != 0 && want.MaxAge != have.MaxAge {
		add("max age", want.MaxAge.String(), ageString(have.MaxAge), "--max-age "+want.MaxAge.String())
	}
	return out
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
