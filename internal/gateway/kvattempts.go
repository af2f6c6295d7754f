package gateway

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// KVAttempts is an AttemptNumbers in a JetStream KV bucket
// (names.GatewayAttemptsBucket), shared by every gateway replica: the
// value of a request's key is the next attempt number no reservation has
// had and the session the request belongs to ("7 sess-1"; a bare number,
// as written before sessions were kept, belongs to the session the ledger
// names), and every change is a compare-and-set on the key's revision, so
// that two replicas never hand out the same number.
//
// A key expires (the bucket's TTL) some time after its last use. A
// request the bucket does not hold is looked up in the ledger first
// (RequestLedger): a request the ledger knows continues from the highest
// attempt its record holds, in its session; one whose record cannot say
// is refused (ErrAttemptsUnknown) rather than numbered from 0 again.
type KVAttempts struct {
	kv     jetstream.KeyValue
	ledger RequestLedger
}

// NewKVAttempts returns the AttemptNumbers of bucket kv, which looks up
// in ledger the requests the bucket no longer (or never) held; a nil
// ledger numbers them from 0.
func NewKVAttempts(kv jetstream.KeyValue, ledger RequestLedger) *KVAttempts {
	return &KVAttempts{kv: kv, ledger: ledger}
}

// maxCASTries bounds the compare-and-set rounds of one reservation; each
// lost round means another call reserved numbers of the same request at
// that moment, so the next round waits a little, jittered, longer each
// time (up to maxCASWait).
const (
	maxCASTries = 64
	maxCASWait  = 20 * time.Millisecond
)

// casWait is the wait before compare-and-set round n (from 1).
func casWait(n int) time.Duration {
	d := min(time.Duration(1<<min(n, 10))*50*time.Microsecond, maxCASWait)
	return d/2 + rand.N(d/2+1)
}

// Reserve implements AttemptNumbers: the ledger's record of the request
// (one read), then a create when the bucket does not hold the request
// (one round trip), else a read and a compare-and-set.
func (k *KVAttempts) Reserve(ctx context.Context, requestID, sessionID string, count int) (Reservation, error) {
	if err := checkRoom(0, count); err != nil {
		return Reservation{}, err
	}
	var known LedgerRequest
	if k.ledger != nil {
		var err error
		if known, err = k.ledger.Lookup(ctx, requestID); err != nil {
			return Reservation{}, fmt.Errorf("attempt numbers of %s: %w", requestID, err)
		}
		if known.Found && known.SessionID != sessionID {
			return Reservation{}, ownedError(requestID)
		}
	}
	first := 0
	if known.Found {
		first = known.HighestAttempt + 1
	}
	if err := checkRoom(first, count); err != nil {
		return Reservation{}, err
	}
	rev, err := k.kv.Create(ctx, requestID, encodeNext(first+count, sessionID))
	if err == nil {
		return Reservation{First: first, Count: count, Session: sessionID, Token: rev}, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return Reservation{}, fmt.Errorf("attempt numbers of %s: %w", requestID, err)
	}
	for n := range maxCASTries {
		if n > 0 {
			select {
			case <-ctx.Done():
				return Reservation{}, fmt.Errorf("attempt numbers of %s: %w", requestID, context.Cause(ctx))
			case <-time.After(casWait(n)):
			}
		}
		e, err := k.kv.Get(ctx, requestID)
		if err != nil {
			return Reservation{}, fmt.Errorf("attempt numbers of %s: %w", requestID, err)
		}
		next, owner, err := decodeNext(e.Value())
		if err != nil {
			return Reservation{}, fmt.Errorf("attempt numbers of %s: %w", requestID, err)
		}
		if owner != "" && owner != sessionID {
			return Reservation{}, ownedError(requestID)
		}
		// A bare number (owner ""): the ledger's session, checked above.
		next = max(next, first)
		if err := checkRoom(next, count); err != nil {
			return Reservation{}, err
		}
		rev, err := k.kv.Update(ctx, requestID, encodeNext(next+count, sessionID), e.Revision())
		if err == nil {
			return Reservation{First: next, Count: count, Session: sessionID, Token: rev}, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return Reservation{}, fmt.Errorf("attempt numbers of %s: %w", requestID, err)
		}
	}
	return Reservation{}, fmt.Errorf("attempt numbers of %s: %d concurrent reservations won over this one", requestID, maxCASTries)
}

// encodeNext is the value of a request's key: the next number, a space
// and the session.
func encodeNext(next int, session string) []byte {
	return append(append(strconv.AppendInt(nil, int64(next), 10), ' '), session...)
}

// decodeNext reads a request's key: "next session", or a bare number
// (owner "").
func decodeNext(v []byte) (next int, owner string, err error) {
	num, owner, _ := strings.Cut(string(v), " ")
	next, err = strconv.Atoi(num)
	if err != nil || next < 0 {
		return 0, "", fmt.Errorf("the bucket holds %q, not a number and a session", v)
	}
	return next, owner, nil
}

// Release implements AttemptNumbers: a compare-and-set against the
// reservation's revision, so that it gives nothing back once another
// reservation followed.
func (k *KVAttempts) Release(ctx context.Context, requestID string, r Reservation, used int) error {
	if used >= r.Count {
		return nil
	}
	_, err := k.kv.Update(ctx, requestID, encodeNext(r.First+max(used, 0), r.Session), r.Token)
	if err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return fmt.Errorf("attempt numbers of %s: %w", requestID, err)
	}
	return nil
}
