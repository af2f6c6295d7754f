// Package logflag owns the logging flags every subcommand takes:
// --log-format (text or json) and --log-level.
package logflag

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Flags are the logging flags.
type Flags struct {
	Format string
	Level  string
}

// Register registers --log-format and --log-level on fs, with level as
// the default level.
func (f *Flags) Register(fs *flag.FlagSet, level string) {
	fs.StringVar(&f.Format, "log-format", "text", "log records on stderr as text or json")
	fs.StringVar(&f.Level, "log-level", level, "debug, info, warn or error")
}

// New returns the logger the flags ask for, writing to w, or an error
// naming the flag that is wrong.
func (f Flags) New(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.Level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", f.Level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f.Format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text or json", f.Format)
}
