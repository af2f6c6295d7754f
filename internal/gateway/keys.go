package gateway

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider"
)

// KeyPrefix starts every client key, so that the gateway tells one apart
// from a provider's API key in the provider's own credential header.
const KeyPrefix = "lk-"

// HeaderKey carries a client key when the provider's credential header
// carries the client's own provider key.
const HeaderKey = "X-Ledger-Key"

// ErrInvalidKeys is wrapped by every error ParseKeys returns for a key
// file it refuses; the message names the entry, the field and the rule.
var ErrInvalidKeys = errors.New("invalid key file")

// Key is one client key of the gateway: who the client is, what sessions
// it may name, and the provider credentials the gateway sends upstream
// for it.
type Key struct {
	// Name names the client (the ID rule); it is logged, the key never is.
	Name string
	// Account is the account the guards of the client's calls are kept
	// under (rate limits, holds, retry budget); "" keys them by a digest
	// of the credential sent upstream.
	Account string
	// Session, when set, is the only session the client may name; a
	// request without HeaderSessionID gets it.
	Session string
	// SessionPrefix, when set, starts every session the client names; a
	// request without HeaderSessionID gets it followed by the gateway's
	// default session.
	SessionPrefix string
	// Labels are the client's labels: its calls' events carry them, over
	// the gateway's (Config.Labels) and under the request's HeaderLabels.
	// They follow the contract's rules (events.ValidateLabels).
	Labels api.Labels
	// Credentials maps a provider's name (anthropic, openai, gemini, or
	// any other of the gateway's Providers) to the API key the gateway
	// sends upstream in place of the client key.
	Credentials map[string]string

	hash [sha256.Size]byte
}

// String names the key's client, and nothing else: the key's credentials
// never reach a log through it.
func (k Key) String() string { return "client key " + k.Name }

// GoString is String, for %#v.
func (k Key) GoString() string { return k.String() }

// LogValue is the key's name, for slog.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.Name) }

// Keys are the client keys of a gateway, by the SHA-256 of each key.
type Keys struct {
	byHash map[[sha256.Size]byte]*Key
}

// Len is the number of keys.
func (k *Keys) Len() int { return len(k.byHash) }

// lookup returns the key whose SHA-256 is that of presented.
func (k *Keys) lookup(presented string) *Key {
	return k.byHash[sha256.Sum256([]byte(presented))]
}

// keyFile is the key file's JSON.
type keyFile struct {
	Keys []keyEntry `json:"keys"`
}

type keyEntry struct {
	Name          string                     `json:"name"`
	SHA256        string                     `json:"sha256"`
	Account       string                     `json:"account"`
	Session       string                     `json:"session"`
	SessionPrefix string                     `json:"session_prefix"`
	Labels        api.Labels                 `json:"labels"`
	Credentials   map[string]credentialEntry `json:"credentials"`
}

// credentialEntry is a provider credential: its value, or the name of the
// environment variable that holds it (so that the file need not).
type credentialEntry struct {
	Value string `json:"value"`
	Env   string `json:"env"`
}

// maxKeyFile bounds a key file.
const maxKeyFile = 16 << 20

// ParseKeys reads a key file (see the package documentation):
//
//	{"keys": [{"name": "team-a", "sha256": "<hex SHA-256 of the key>",
//	           "session_prefix": "team-a-", "account": "acme-prod",
//	           "credentials": {"anthropic": {"env": "TEAM_A_ANTHROPIC_KEY"},
//	                           "openai": {"value": "sk-..."}},
//	           "labels": {"team": "a"}}]}
//
// getenv resolves the credentials given by "env". Unknown members, a
// missing or malformed field, two entries with one name or one hash, and
// an empty credential are refused with an error wrapping ErrInvalidKeys
// that names the entry and the field.
func ParseKeys(r io.Reader, getenv func(string) string) (*Keys, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKeys, err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("%w: larger than %s", ErrInvalidKeys, byteSize(maxKeyFile))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f keyFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKeys, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: more than one JSON value; the file is one object {\"keys\": [...]}", ErrInvalidKeys)
	}
	if len(f.Keys) == 0 {
		return nil, fmt.Errorf("%w: \"keys\" is empty; it must list at least one key", ErrInvalidKeys)
	}
	ks := &Keys{byHash: make(map[[sha256.Size]byte]*Key, len(f.Keys))}
	names := make(map[string]bool, len(f.Keys))
	for i := range f.Keys {
		k, err := f.Keys[i].key(getenv)
		if err != nil {
			return nil, fmt.Errorf("%w: keys[%d]: %w", ErrInvalidKeys, i, err)
		}
		if names[k.Name] {
			return nil, fmt.Errorf("%w: keys[%d]: name %q is used twice", ErrInvalidKeys, i, k.Name)
		}
		if ks.byHash[k.hash] != nil {
			return nil, fmt.Errorf("%w: keys[%d] (%s): its sha256 is also %s's", ErrInvalidKeys, i, k.Name, ks.byHash[k.hash].Name)
		}
		names[k.Name] = true
		ks.byHash[k.hash] = k
	}
	return ks, nil
}

// LoadKeys reads the key file at path with ParseKeys.
func LoadKeys(path string, getenv func(string) string) (*Keys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ks, err := ParseKeys(f, getenv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ks, nil
}

// key validates the entry.
func (e *keyEntry) key(getenv func(string) string) (*Key, error) {
	if err := events.ValidateID("name", e.Name); err != nil {
		return nil, err
	}
	k := &Key{Name: e.Name, Account: e.Account, Session: e.Session, SessionPrefix: e.SessionPrefix, Labels: e.Labels}
	sum, err := hex.DecodeString(e.SHA256)
	if err != nil || len(sum) != sha256.Size {
		return nil, fmt.Errorf("%s: sha256 must be the 64 hex digits of the key's SHA-256 (gateway key new prints it)", e.Name)
	}
	copy(k.hash[:], sum)
	if err := events.ValidateLabels(k.Labels); err != nil {
		return nil, fmt.Errorf("%s: %w", e.Name, err)
	}
	if len(k.Labels) == 0 {
		k.Labels = nil
	}
	if k.Account != "" {
		if err := events.ValidateID("account", k.Account); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name, err)
		}
	}
	switch {
	case k.Session != "" && k.SessionPrefix != "":
		return nil, fmt.Errorf("%s: session and session_prefix exclude each other", e.Name)
	case k.Session != "":
		if err := events.ValidateID("session", k.Session); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name, err)
		}
	case k.SessionPrefix != "":
		if err := events.ValidateID("session_prefix", k.SessionPrefix); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name, err)
		}
	}
	if len(e.Credentials) > 0 {
		k.Credentials = make(map[string]string, len(e.Credentials))
	}
	for p, c := range e.Credentials {
		if err := provider.ValidateName("credentials", p); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name, err)
		}
		v := c.Value
		switch {
		case c.Value != "" && c.Env != "":
			return nil, fmt.Errorf("%s: credentials.%s: value and env exclude each other", e.Name, p)
		case c.Env != "":
			if v = getenv(c.Env); v == "" {
				return nil, fmt.Errorf("%s: credentials.%s: the environment variable %s is not set", e.Name, p, c.Env)
			}
		case v == "":
			return nil, fmt.Errorf("%s: credentials.%s: value or env is required", e.Name, p)
		}
		if strings.HasPrefix(v, KeyPrefix) || strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("%s: credentials.%s: not a provider API key (a client key, or a line break)", e.Name, p)
		}
		k.Credentials[p] = strings.TrimSpace(v)
	}
	return k, nil
}

// NewKey makes a client key ("lk-" and 32 random bytes, base64url) and
// returns it with the hex SHA-256 that the key file holds.
func NewKey() (key, sha string, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	key = KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(key))
	return key, hex.EncodeToString(sum[:]), nil
}

// HoldCredentials reports whether some key holds provider credentials.
func (k *Keys) HoldCredentials() bool {
	for _, v := range k.byHash {
		if len(v.Credentials) > 0 {
			return true
		}
	}
	return false
}

// Names returns the names of the keys, sorted.
func (k *Keys) Names() []string {
	out := make([]string, 0, len(k.byHash))
	for _, v := range k.byHash {
		out = append(out, v.Name)
	}
	sort.Strings(out)
	return out
}

// check refuses keys whose credentials name a provider that is not one
// of reg's: the credential would never be sent. Nil keys pass.
func (k *Keys) check(reg *provider.Registry) error {
	if k == nil {
		return nil
	}
	keys := slices.SortedFunc(maps.Values(k.byHash), func(a, b *Key) int { return strings.Compare(a.Name, b.Name) })
	for _, v := range keys {
		for _, p := range slices.Sorted(maps.Keys(v.Credentials)) {
			if _, ok := reg.Lookup(p); !ok {
				return fmt.Errorf("Keys: %s: credentials: %q is not one of the gateway's providers (%s)", v.Name, p, strings.Join(reg.Names(), ", "))
			}
		}
	}
	return nil
}
