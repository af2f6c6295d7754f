package gateway

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentledger/ledger/internal/events"
)

// callIDs are the IDs of one accounted request.
type callIDs struct {
	session string
	// request is the client's request ID ("" when the client named none:
	// the middleware makes a ULID).
	request string
}

// identify reads the session (HeaderSessionID, else def, or what the
// client's key k makes of it) and the request ID (HeaderRequestID, else
// one derived from HeaderIdempotencyKey). A header that breaks the
// contract's ID rule is an *events.FieldError naming it; a session k does
// not allow wraps errSessionForbidden.
func identify(r *http.Request, def string, k *Key) (callIDs, error) {
	ids := callIDs{session: r.Header.Get(HeaderSessionID)}
	if ids.session == "" {
		ids.session = def
		if k != nil && k.Session != "" {
			ids.session = k.Session
		} else if k != nil {
			ids.session = k.SessionPrefix + def
		}
	}
	if err := events.ValidateID(HeaderSessionID, ids.session); err != nil {
		if r.Header.Get(HeaderSessionID) == "" {
			return ids, fmt.Errorf("%w (the request has no %s, and the gateway's default session is not a valid one)", err, HeaderSessionID)
		}
		return ids, err
	}
	switch {
	case k == nil:
	case k.Session != "" && ids.session != k.Session:
		return ids, fmt.Errorf("%w: %s %q: the client key %s allows only session %q", errSessionForbidden, HeaderSessionID, ids.session, k.Name, k.Session)
	case !strings.HasPrefix(ids.session, k.SessionPrefix):
		return ids, fmt.Errorf("%w: %s %q: the client key %s allows only sessions that start with %q", errSessionForbidden, HeaderSessionID, ids.session, k.Name, k.SessionPrefix)
	}
	if id := r.Header.Get(HeaderRequestID); id != "" {
		if err := events.ValidateID(HeaderRequestID, id); err != nil {
			return ids, err
		}
		ids.request = id
		return ids, nil
	}
	if key := r.Header.Get(HeaderIdempotencyKey); key != "" {
		ids.request = idempotencyRequestID(key)
	}
	return ids, nil
}

// idempotencyRequestID is the request ID of an idempotency key: the key
// itself when it follows the ID rule (a UUID, the SDKs' keys), else
// "idem-" and 32 characters of its SHA-256, so that the same key always
// names the same request.
func idempotencyRequestID(key string) string {
	if events.ValidateID("request_id", key) == nil {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "idem-" + base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:20])
}
