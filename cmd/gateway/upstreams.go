package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/provider/openai"
)

// compatKind is the kind of an upstream spec that names no preset: an
// API in OpenAI's dialect with OpenAI's rules, at the URL given.
const compatKind = "openai-compatible"

// upstreamSyntax describes an --upstream value, for the help and the
// errors.
var upstreamSyntax = "NAME=" + compatKind + ",URL, NAME=PRESET[,URL] or PRESET, with PRESET one of " +
	strings.Join(openai.Presets(), ", ") + " and URL the API's origin without /v1 (clients use http://GATEWAY/NAME/v1)"

// upstreamFlags are the OpenAI-compatible upstreams the flags name. None
// is mounted unless named: a preset such as ollama serves on the
// operator's machine, and the gateway must not expose it by default.
type upstreamFlags struct {
	specs []string
	file  string
}

func (u *upstreamFlags) register(fs *flag.FlagSet) {
	fs.Func("upstream", "an OpenAI-compatible upstream to mount at /NAME/, repeatable: "+upstreamSyntax+
		"; e.g. --upstream mistral, --upstream local=vllm,http://10.0.0.5:8000, --upstream corp=openai-compatible,https://llm.corp.example/api. The ledger records its calls under provider NAME",
		func(s string) error { u.specs = append(u.specs, s); return nil })
	fs.StringVar(&u.file, "upstreams", "", "a `file` of --upstream values, one a line (# starts a comment)")
}

// upstreamSpec is one parsed --upstream value.
type upstreamSpec struct {
	name   string
	config openai.Config
	source string // the flag (and line) it came from, for the errors
}

// parse reads the specs of the flags and of the file, and checks each
// with openai.Compatible; the error names the flag (and line) and the
// rule.
func (u *upstreamFlags) parse() ([]provider.Provider, error) {
	type item struct{ source, spec string }
	var items []item
	for _, s := range u.specs {
		items = append(items, item{"--upstream " + quoteSpec(s), s})
	}
	if u.file != "" {
		lines, err := readSpecFile(u.file)
		if err != nil {
			return nil, cli.Usagef("--upstreams: %v", err)
		}
		for _, l := range lines {
			items = append(items, item{fmt.Sprintf("--upstreams %s:%d", u.file, l.n), l.text})
		}
	}
	var out []provider.Provider
	seen := map[string]string{}
	for _, it := range items {
		spec, err := parseUpstream(it.spec)
		if err != nil {
			return nil, cli.Usagef("%s: %v", it.source, err)
		}
		if prev, ok := seen[spec.name]; ok {
			return nil, cli.Usagef("%s: name %q is already the upstream of %s", it.source, spec.name, prev)
		}
		if _, ok := provider.Lookup(spec.name); ok {
			return nil, cli.Usagef("%s: name %q is a built-in provider's (%s): choose another", it.source, spec.name, strings.Join(provider.Names(), ", "))
		}
		p, err := openai.Compatible(spec.name, spec.config)
		if err != nil {
			return nil, cli.Usagef("%s: %v", it.source, err)
		}
		seen[spec.name] = it.source
		out = append(out, p)
	}
	return out, nil
}

// quoteSpec quotes a spec for an error message.
func quoteSpec(s string) string { return fmt.Sprintf("%q", s) }

// parseUpstream reads NAME=openai-compatible,URL, NAME=PRESET[,URL] or
// PRESET.
func parseUpstream(s string) (upstreamSpec, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return upstreamSpec{}, errors.New("empty: want " + upstreamSyntax)
	}
	name, rest, named := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !named {
		if strings.Contains(s, ",") {
			return upstreamSpec{}, fmt.Errorf("%q has a URL but no NAME=: want %s", s, upstreamSyntax)
		}
		if _, ok := openai.LookupPreset(name); !ok {
			return upstreamSpec{}, fmt.Errorf("%q is not a preset (%s): want %s", name, strings.Join(openai.Presets(), ", "), upstreamSyntax)
		}
		return upstreamSpec{name: name, config: openai.Config{Preset: name}}, nil
	}
	kind, url, _ := strings.Cut(rest, ",")
	kind, url = strings.TrimSpace(kind), strings.TrimSpace(url)
	switch {
	case kind == compatKind:
		if url == "" {
			return upstreamSpec{}, fmt.Errorf("%s needs its URL: want NAME=%s,URL", compatKind, compatKind)
		}
		return upstreamSpec{name: name, config: openai.Config{Origin: url}}, nil
	case kind == "":
		return upstreamSpec{}, fmt.Errorf("%q names no kind after NAME=: want %s", s, upstreamSyntax)
	}
	if _, ok := openai.LookupPreset(kind); !ok {
		return upstreamSpec{}, fmt.Errorf("kind %q is neither %s nor a preset (%s)", kind, compatKind, strings.Join(openai.Presets(), ", "))
	}
	return upstreamSpec{name: name, config: openai.Config{Preset: kind, Origin: url}}, nil
}

// specLine is a line of an upstreams file.
type specLine struct {
	n    int
	text string
}

// maxSpecFile bounds an upstreams file: a mistaken path to something
// large fails rather than being read whole.
const maxSpecFile = 1 << 20

// readSpecFile returns the lines of path that are not blank or comments
// (# to the end of the line, at its start or after a space).
func readSpecFile(path string) ([]specLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxSpecFile {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", path, st.Size(), maxSpecFile)
	}
	var out []specLine
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.Index(line, "#"); i == 0 || (i > 0 && (line[i-1] == ' ' || line[i-1] == '\t')) {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, specLine{n, line})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return out, nil
}
