package connect

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestResolveServer(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		env  map[string]string
		want string
	}{
		{"nothing named", Options{}, nil, DefaultURL},
		{"from the environment", Options{}, map[string]string{EnvURL: "nats://a:4222"}, "nats://a:4222"},
		{"the flag wins", Options{URL: "nats://flag:4222"}, map[string]string{EnvURL: "nats://a:4222"}, "nats://flag:4222"},
		{"a context names it", Options{Context: "prod"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			o.ResolveServer(func(k string) string { return tt.env[k] })
			assert.Equal(t, tt.want, o.URL)
		})
	}
}
