// Command agent is an agent in another module that joins the ledger: it
// calls the Anthropic Messages API through the ledger's retry middleware
// with the official SDK, and publishes one event per attempt to the
// ledger's stream.
//
//	NATS_URL=nats://127.0.0.1:4222 ANTHROPIC_API_KEY=... agent -session sess-1 "Hello"
//
// It connects with the nats CLI's environment variables (NATS_URL,
// NATS_CREDS, NATS_NKEY, NATS_CA, NATS_CERT, NATS_KEY, NATS_CONTEXT);
// ANTHROPIC_BASE_URL points the SDK at another endpoint.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/provider/anthropic"
)

func main() {
	session := flag.String("session", "sess-1", "session ID of the calls")
	model := flag.String("model", "claude-sonnet-4-5", "model")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	msg, err := run(ctx, config{Session: *session, Model: *model, Prompt: flag.Arg(0)}, ledger.WithEnv())
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
	fmt.Println(msg)
}

// config is one call to make.
type config struct {
	Session, RequestID, Model, Prompt string
	// Options are the SDK client's options besides the ledger's (a base
	// URL, an API key); the SDK reads ANTHROPIC_API_KEY and
	// ANTHROPIC_BASE_URL by itself.
	Options []option.RequestOption
	Policy  ledger.Policy // the zero Policy is ledger.DefaultPolicy()
}

// run makes one call through the middleware, publishing its attempts, and
// returns the answer's text. Every error is returned: with NATS down, the
// *ledger.ConnectError that says which server refused and why.
func run(ctx context.Context, cfg config, connect ...ledger.ConnectOption) (string, error) {
	conn, err := ledger.Connect(ctx, connect...) // ledger.WithEnv(): NATS_URL, NATS_CREDS, NATS_CA, ... (see Connecting)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	pub, err := ledger.NewPublisher(ctx, conn.JetStream()) // async: never waits on an ack in the call path
	if err != nil {
		return "", err
	}
	defer func() { // drains; reports the events it could not deliver
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if st, err := pub.Close(cctx); err != nil {
			slog.Error("agent: events undelivered", "undelivered", st.Undelivered, "err", err)
		}
	}()
	mw, err := ledger.NewMiddleware(pub, ledger.WithPolicy(cfg.Policy)) // classifies the errors of the SDKs whose adapter is imported
	if err != nil {
		return "", err
	}
	defer mw.Close()
	client := sdk.NewClient(append(cfg.Options, anthropic.ClientOptions()...)...) // the SDK's own retries off (the middleware is the only retry layer), stream progress reported

	call := ledger.Call{SessionID: cfg.Session, RequestID: cfg.RequestID, Provider: anthropic.Name, Model: cfg.Model}
	msg, err := ledger.Do(ctx, mw, call, func(ctx context.Context, a ledger.Attempt) (*sdk.Message, ledger.Report, error) {
		// Streamed, so that an attempt that fails after the input was
		// billed still reports what it cost.
		stream := client.Messages.NewStreaming(ctx, sdk.MessageNewParams{
			Model: sdk.Model(cfg.Model), MaxTokens: 1024,
			Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(cfg.Prompt))},
		})
		defer stream.Close()
		var usage anthropic.StreamUsage
		var m sdk.Message
		for stream.Next() {
			usage.Observe(stream.Current())
			if err := m.Accumulate(stream.Current()); err != nil {
				return nil, ledger.Report{Usage: usage.Usage(), ServiceTier: usage.ServiceTier()}, err
			}
		}
		return &m, ledger.Report{Usage: usage.Usage(), ServiceTier: usage.ServiceTier()}, stream.Err()
	})
	if err != nil {
		return "", err // a *ledger.CallError: why the call ended, after how many attempts
	}
	text := ""
	for _, b := range msg.Content {
		text += b.Text
	}
	return text, nil
}
