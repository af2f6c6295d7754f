// Package testkit owns the two test doubles every package's tests share:
// the fake clock and the log buffer. Tests inject time and read logs
// through them instead of declaring their own.
//
// Clock is the fake clock. Its time moves only when the test says so
// (Advance, Set, StepWall, StepMonotonic), or, on request, by a step at
// every reading (AutoStep). It satisfies the clock interfaces of the
// production packages: a func() time.Time (Now, for breaker, guard,
// fleet, fakeprovider, progress, projection...), retry.Clock (Now,
// Monotonic, Sleep) and, through a one-line adapter for the Timer return
// type, emit.Clock (Now, NewTimer). Its Sleep returns at once and moves the
// time by the wait, recording it (Sleeps), so cooldowns, holds and windows
// pass without real waiting; HoldSleeps makes it block instead. Its timers
// (NewTimer, After, AfterFunc) fire, in order of their deadlines, when the
// time reaches them. NewRealClock gives the other kind of clock the tests
// need: real time plus an offset the test moves (Advance), which a test can
// Freeze (a paused process's clock) and Thaw.
//
// Logs is the log buffer: an io.Writer safe for concurrent use, a
// destination for a slog handler (NewLogger) or a command's output. It
// reads back as text (String, Lines, Contains), as records (Records,
// Count, for the JSON and text formats of slog), and waits for a
// condition on the logs with a deadline (Wait, WaitFor, WaitContains),
// waking on every write instead of sleeping.
//
// The package imports no package of the module, so that any package's
// internal tests can import it. Its test TestNoOtherFakeClockOrLogBuffer
// fails when a test file elsewhere declares a clock (a type with a Now()
// time.Time method) or a log buffer (a type with a Write method over a
// bytes.Buffer or strings.Builder) of its own, naming it; a copy that must
// stay is listed, with the reason, in its allowed table.
package testkit
