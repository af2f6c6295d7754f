package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/logflag"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// registerFaultFlags registers the fault mix's flags, the same for
// simulate and fakeprovider, with the defaults of def.
func registerFaultFlags(fs *flag.FlagSet, mix *fakeprovider.Mix, def fakeprovider.Mix) {
	fs.Float64Var(&mix.RateLimit, "rate-limit", def.RateLimit, "probability of a 429 per attempt")
	fs.Float64Var(&mix.Overload, "overload", def.Overload, "probability of an overload (529/503) per attempt")
	fs.Float64Var(&mix.ServerError, "server-error", def.ServerError, "probability of a 500 per attempt")
	fs.Float64Var(&mix.BilledTimeout, "billed-timeout", def.BilledTimeout, "probability per attempt of a stream that bills the input and stalls")
	fs.Float64Var(&mix.BadRequest, "bad-request", def.BadRequest, "probability of a permanent 400 per call")
}

// fakeProviderFlags are the flags of publisher fakeprovider.
type fakeProviderFlags struct {
	listen    string
	opts      fakeprovider.Options
	truthFile string
	logs      logflag.Flags
}

func parseFakeProvider(args []string, stderr io.Writer) (*fakeProviderFlags, error) {
	f := &fakeProviderFlags{}
	fs := flag.NewFlagSet("publisher fakeprovider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: publisher fakeprovider [flags]

Serves the simulator's fake provider over HTTP until SIGINT/SIGTERM, at the
providers' own paths: give a gateway (or an SDK) its URL as every provider's
origin. Its ground truth is grouped by the X-Ledger-Session-Id,
X-Ledger-Request-Id and X-Ledger-Attempt headers of each request (a gateway
sends them with --forward-ledger-headers); a request without them is
answered 400.

Flags:`)
		fs.PrintDefaults()
	}
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8089", "address to serve on (port 0: any free port; the URL is printed)")
	fs.Uint64Var(&f.opts.Seed, "seed", 1, "seed of every decision")
	registerFaultFlags(fs, &f.opts.Mix, fakeprovider.DefaultMix())
	fs.Float64Var(&f.opts.Mix.BrokenStream, "broken-stream", 0, "probability per attempt of a stream cut after a few tokens (a request that does not stream is disconnected, unbilled)")
	fs.StringVar(&f.truthFile, "truth", "", "write the ground truth as JSON to this `file` when stopped")
	f.logs.Register(fs, "warn")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("fakeprovider takes no arguments, got %q", fs.Args())
	}
	if err := f.opts.Mix.Validate(); err != nil {
		return nil, cli.Usagef("fault mix (--rate-limit, --overload, --server-error, --billed-timeout, --bad-request, --broken-stream): %v", err)
	}
	if _, err := f.logs.New(io.Discard); err != nil {
		return nil, cli.Usagef("%v", err)
	}
	return f, nil
}

// runFakeProvider serves until ctx ends, then writes the truth.
func runFakeProvider(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseFakeProvider(args, stderr)
	if err != nil {
		return err
	}
	logger, _ := f.logs.New(stderr)
	if f.truthFile != "" {
		// Fail now rather than lose the truth at the end.
		file, err := os.OpenFile(f.truthFile, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return cli.Usagef("--truth: %v", err)
		}
		_ = file.Close()
	}
	srv, err := fakeprovider.Listen(f.listen, f.opts)
	if err != nil {
		if errors.Is(err, fakeprovider.ErrInvalidOptions) {
			return cli.Usagef("%v", err)
		}
		return cli.Usagef("--listen: %v", err)
	}
	fmt.Fprintf(stdout, "fakeprovider listening on %s\n", srv.URL())
	logger.Info("fakeprovider: listening", "url", srv.URL(), "seed", f.opts.Seed)
	<-ctx.Done()
	srv.Close() // waits for every handler: the truth is final
	truth := srv.Truth()
	logger.Info("fakeprovider: stopped", "requests", srv.Requests(), "attempts", truth.Total.Attempts)
	if f.truthFile != "" {
		if err := writeJSONFile(f.truthFile, truth); err != nil {
			return cli.Failed(err)
		}
		fmt.Fprintf(stdout, "truth written to %s\n", f.truthFile)
	}
	return nil
}
