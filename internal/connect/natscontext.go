package connect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// natsContext is the part of a nats CLI context this package reads. Every
// other field the CLI writes is listed in unsupportedContextFields or
// ignored because it does not change how to connect (description,
// color_scheme, name).
type natsContext struct {
	URL         string `json:"url"`
	User        string `json:"user"`
	Password    string `json:"password"`
	Token       string `json:"token"`
	Creds       string `json:"creds"`
	NKey        string `json:"nkey"`
	Cert        string `json:"cert"`
	Key         string `json:"key"`
	CA          string `json:"ca"`
	TLSFirst    bool   `json:"tls_first"`
	InboxPrefix string `json:"inbox_prefix"`
	JSDomain    string `json:"jetstream_domain"`
	JSAPIPrefix string `json:"jetstream_api_prefix"`

	path string // the file it was read from
}

// unsupportedContextFields are context fields that change how the nats CLI
// connects and that this reader does not implement; a context that sets
// one is refused rather than half applied.
var unsupportedContextFields = []string{
	"nsc", "socks_proxy", "user_jwt", "user_seed",
	"windows_cert_store", "windows_cert_match_by", "windows_cert_match", "windows_ca_certs_match",
}

// contextPath is where the context named name lives: name itself when it
// is a path to a .json file, else NAME.json in the nats CLI's context
// directory ($XDG_CONFIG_HOME/nats/context, or ~/.config/nats/context).
func contextPath(name string, getenv func(string) string) (string, error) {
	if strings.HasSuffix(name, ".json") && strings.ContainsRune(name, filepath.Separator) {
		return name, nil
	}
	if name == "" || strings.Contains(name, "..") || strings.ContainsRune(name, filepath.Separator) {
		return "", fmt.Errorf("context: %q is not a context name (nor a path to a .json file)", name)
	}
	root := getenv("XDG_CONFIG_HOME")
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("context %q: cannot find the home directory: %w", name, err)
		}
		root = filepath.Join(home, ".config")
	}
	return filepath.Join(root, "nats", "context", name+".json"), nil
}

// loadContext reads and checks the context named name.
func loadContext(name string, getenv func(string) string) (*natsContext, error) {
	path, err := contextPath(name, getenv)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("context %q: %w", name, err)
	}
	return parseContext(data, path, getenv)
}

// parseContext decodes a context file and checks that it uses nothing
// this reader does not implement.
func parseContext(data []byte, path string, getenv func(string) string) (*natsContext, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("context %s: not a JSON object: %w", path, err)
	}
	for _, f := range unsupportedContextFields {
		if v, ok := raw[f]; ok && !emptyJSON(v) {
			return nil, fmt.Errorf("context %s: field %q is set, which this program does not support; connect with --nats-url, --creds, --nkey and --tls-* instead", path, f)
		}
	}
	c := &natsContext{path: path}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("context %s: %w", path, err)
	}
	for _, s := range []struct {
		field string
		v     *string
		path  bool
	}{
		{"password", &c.Password, false}, {"token", &c.Token, false},
		{"creds", &c.Creds, true}, {"nkey", &c.NKey, true},
		{"cert", &c.Cert, true}, {"key", &c.Key, true}, {"ca", &c.CA, true},
	} {
		v, err := contextValue(path, s.field, *s.v, s.path, getenv)
		if err != nil {
			return nil, err
		}
		*s.v = v
	}
	if c.JSDomain != "" && c.JSAPIPrefix != "" {
		return nil, fmt.Errorf("context %s: jetstream_domain and jetstream_api_prefix are both set; give one", path)
	}
	return c, nil
}

// contextValue resolves one secret or path of a context: a file:// URI
// becomes its path; the other credential URIs of the nats CLI (op://,
// nsc://, env://, data:) are refused; paths get ~ and $VAR expanded.
func contextValue(path, field, v string, isPath bool, getenv func(string) string) (string, error) {
	if v == "" {
		return "", nil
	}
	if rest, ok := strings.CutPrefix(v, "file://"); ok {
		v, isPath = rest, true
	} else {
		for _, scheme := range []string{"op://", "nsc://", "env://", "data:"} {
			if strings.HasPrefix(v, scheme) {
				return "", fmt.Errorf("context %s: field %q uses a %s reference, which this program does not resolve; give the file or secret directly", path, field, strings.TrimSuffix(scheme, "//"))
			}
		}
	}
	if !isPath {
		return v, nil
	}
	v = os.Expand(v, getenv)
	if rest, ok := strings.CutPrefix(v, "~"); ok && (rest == "" || rest[0] == '/') {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("context %s: field %q: cannot expand ~: %w", path, field, err)
		}
		v = home + rest
	}
	return v, nil
}

func emptyJSON(v json.RawMessage) bool {
	switch string(bytes.TrimSpace(v)) {
	case `""`, "null", "false", "[]", "{}", "0":
		return true
	}
	return false
}
