// Package provider owns the seam between the ledger and the LLM
// providers: the Provider interface, which says everything the ledger
// knows of one provider's HTTP API, and the registry of providers by
// name.
//
// A provider is one folder under internal/provider (its public adapter is
// the folder of the same name under provider/). The folder owns, and
// nothing outside it knows:
//
//   - its name, origin and credential headers (Upstream);
//   - the paths the gateway accounts (Match) and what it reads of a
//     request (Inspect), including the usage option it must add;
//   - usage from a whole body and from a stream (BodyUsage, NewStream),
//     its reasoning and 1-hour cache-write subsets, the service tier
//     that served it, and what a broken stream cannot tell;
//   - classification of its SDK's errors, of raw error responses and of
//     error events in a stream;
//   - its error body, for the errors the gateway makes itself;
//   - its rate-limit headers (RateLimits);
//   - its dialect in the fake provider, for the simulator and ledgertest
//     (fake.go: a fakekit.Dialect, offered by implementing fakekit.Faker);
//   - the features it declares to the conformance suite, which every
//     provider runs.
//
// Each provider registers itself in its package's init (Register, which
// also registers its classifier and its rate-limit headers with package
// retry: the one registration a provider makes), so a program knows the
// providers whose packages it links; internal/provider/builtin links
// Anthropic, OpenAI and Gemini. The OpenAI-compatible upstreams are
// Providers made from a preset or a URL at run time (openai.New), kept
// in a Registry by whoever configures them: Builtin returns one holding
// the built-ins, to add them to. The gateway, the guards, the simulator, the fake provider,
// ledgertest and the bench consult a Registry: outside the provider
// folders no code switches on a provider's name.
//
// This follows Bifrost's core/schemas/provider.go (one interface, one
// folder per provider) and watermill's pubsub/tests (one suite every
// implementation runs).
package provider
