package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/projection"
)

// liveOnlyRequests finds the live request records the replay did not
// produce (a record for a request the stream does not have, or created
// after the target). Every request the replay produced read its live
// record once; the live bucket's subjects are never removed (a delete
// leaves a marker), so when it has as many subjects as those reads found,
// every live key is a request the replay compared, and there is nothing
// to look for. Otherwise (a live aggregator wrote new requests meanwhile,
// or the ledger has records the stream does not) it reads every live
// record and asks the stream, by subject, whether the replay produced it.
func (v *verifier) liveOnlyRequests(ctx context.Context) error {
	s, err := v.js.Stream(ctx, "KV_"+names.RequestsBucket)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("replay: opening %s: %w", names.RequestsBucket, err)
	}
	ids, err := requestKeys(ctx, s)
	if err != nil {
		return err
	}
	if ids == v.liveFound {
		return nil
	}
	var pending []liveReq
	err = eachKV(ctx, v.js, "KV_"+names.RequestsBucket, liveRequestPrefix, func(e kvEntry) error {
		if e.deleted || strings.Contains(e.key, ".") {
			return nil
		}
		pending = append(pending, parseLiveReq(e))
		if len(pending) < maxSubjects {
			return nil
		}
		err := v.checkLiveOnly(ctx, pending)
		pending = pending[:0]
		return err
	})
	if err != nil {
		return err
	}
	return v.checkLiveOnly(ctx, pending)
}

// requestKeys counts the keys of ledger_requests that can be request IDs:
// all but those with a dot (an ID has none), such as the aggregator's
// fence marker.
func requestKeys(ctx context.Context, s jetstream.Stream) (uint64, error) {
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("replay: reading %s: %w", names.RequestsBucket, err)
	}
	dotted, err := s.Info(ctx, jetstream.WithSubjectFilter(liveRequestPrefix+"*.>"))
	if err != nil {
		return 0, fmt.Errorf("replay: reading %s: %w", names.RequestsBucket, err)
	}
	return info.State.NumSubjects - uint64(len(dotted.State.Subjects)), nil
}

// liveReq is a live request record with what the pass needs of it.
type liveReq struct {
	id, session string // session "" when unreadable or not an ID
	seq         uint64
	value       []byte
}

func parseLiveReq(e kvEntry) liveReq {
	r := liveReq{id: e.key, value: append([]byte(nil), e.value...)}
	var rec struct {
		SessionID string `json:"session_id"`
		Seq       uint64 `json:"seq"`
	}
	if json.Unmarshal(e.value, &rec) == nil && events.ValidateID("session_id", rec.SessionID) == nil && events.ValidateID("request_id", e.key) == nil {
		r.session, r.seq = rec.SessionID, rec.Seq
	}
	return r
}

// checkLiveOnly compares the live records the replay did not produce.
// The replay produced a request when the stream has an accepted event of
// it up to the target. Looking under the session the live record names
// finds it, unless the record names another session than the request's
// (or none): then the replay compared it and found so, and put it in the
// drift set.
func (v *verifier) checkLiveOnly(ctx context.Context, rs []liveReq) error {
	var subjects []string
	for _, r := range rs {
		if r.session != "" {
			subjects = append(subjects, events.Subject(r.session, r.id))
		}
	}
	last, err := multiLast(ctx, v.nc, names.AttemptsStream, subjects, 0, v.target)
	if err != nil {
		return err
	}
	for _, r := range rs {
		produced, err := v.produced(ctx, r, last)
		if err != nil {
			return err
		}
		if produced {
			continue
		}
		switch {
		case r.seq <= v.p:
			v.checkRequest(r.id, v.p, r.value, true, nil)
		case r.seq <= v.target:
			v.checkRequest(r.id, r.seq, r.value, true, nil)
		default:
			re, err := v.newRequest(ctx, r.id, r.seq)
			if err != nil {
				return err
			}
			v.checkRequest(r.id, r.seq, r.value, true, re)
		}
	}
	return nil
}

// produced reports whether the replay produced request r.
func (v *verifier) produced(ctx context.Context, r liveReq, last map[string]rawMsg) (bool, error) {
	if r.session != "" {
		subj := events.Subject(r.session, r.id)
		if m, ok := last[subj]; ok {
			if _, err := projection.Accept(m.subject, m.data); err == nil {
				return true, nil
			}
			found := false // the last one is not accepted: an earlier one may be
			err := nextBySubject(ctx, v.nc, names.AttemptsStream, subj, 1, v.target, func(m rawMsg) bool {
				_, aerr := projection.Accept(m.subject, m.data)
				found = aerr == nil
				return !found
			})
			if err != nil || found {
				return found, err
			}
		}
	}
	owner, err := v.drift.owner(ctx, r.id)
	return owner != "", err
}

// newRequest recomputes a request the replay did not produce, as it
// stands at seq: from its events after the target, on any session's
// subject (the first accepted one owns it).
func (v *verifier) newRequest(ctx context.Context, id string, seq uint64) (*projection.Request, error) {
	var re *projection.Request
	if events.ValidateID("request_id", id) != nil {
		return nil, nil // no event names it
	}
	err := nextBySubject(ctx, v.nc, names.AttemptsStream, names.AttemptsPrefix+"*."+id, v.target+1, seq, func(m rawMsg) bool {
		ev, err := projection.Accept(m.subject, m.data)
		if err != nil {
			return true
		}
		if re == nil {
			re = projection.NewRequest(ev.RequestID, ev.SessionID)
		}
		projection.Fold(re, ev, v.apply)
		return true
	})
	return re, err
}
