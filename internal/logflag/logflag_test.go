package logflag

import (
	"bytes"
	"encoding/json"
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFlags(t *testing.T) {
	var f Flags
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f.Register(fs, "info")
	require.NoError(t, fs.Parse([]string{"--log-format", "json", "--log-level", "debug"}))
	var buf bytes.Buffer
	log, err := f.New(&buf)
	require.NoError(t, err)
	log.Debug("hello", "n", 1)
	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
	assert.Equal(t, "hello", rec["msg"])

	_, err = Flags{Format: "xml", Level: "info"}.New(&buf)
	assert.ErrorContains(t, err, "--log-format")
	_, err = Flags{Format: "text", Level: "loud"}.New(&buf)
	assert.ErrorContains(t, err, "--log-level")
}
