package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Retries. Every request on an object (HEAD, a listing page, a GET and
// the GETs that resume its body) goes through retrying, which owns all
// the retries (the SDK makes one try a call): it counts the attempts,
// keeps the last error and status for the error that ends them, bounds
// each attempt's wait for a response, logs while an object keeps failing,
// and bounds the time one object may keep failing (Retry.Timeout), across
// calls: once an object has failed for that long, each later call makes
// one attempt, so a dead object fails every read at once rather than after
// a full round of retries each.

// ErrShortBody is a response body that ended before its Content-Length
// (or before the bytes asked for): a connection cut mid-body. It is
// retried from where it stopped; it is what the last attempt met when
// the retries are spent.
var ErrShortBody = errors.New("body cut short")

// ErrZeroByte is an object of no bytes where a shard was expected: no
// format stores a dataset in nothing, so it is a failed or interrupted
// upload, named as such rather than left to a format to misread.
var ErrZeroByte = errors.New("zero-byte object")

// errNoResponse fails an attempt that got no response headers in time.
var errNoResponse = errors.New("no response")

// RetryError is an *Error's Err when an object's requests kept failing:
// Attempts ran out, or the object had been failing for longer than
// Retry.Timeout. It unwraps to the last attempt's error.
type RetryError struct {
	Attempts int           // requests this call made, the first included
	Total    int           // failed requests for the object since it last worked (this call's and earlier calls')
	Failing  time.Duration // since the object last worked (or its first failure)
	Bound    time.Duration // the time bound that ended the retries (Retry.Timeout); 0: Attempts did
	Status   int           // the last response's HTTP status; 0 where none came (timeout, reset, body cut short)
	Err      error         // the last attempt's error
}

func (e *RetryError) Error() string {
	s := fmt.Sprintf("gave up after %d attempts", e.Attempts)
	if e.Total > e.Attempts {
		s += fmt.Sprintf(" (%d failed requests in all)", e.Total)
	}
	s += fmt.Sprintf(", failing for %v", e.Failing.Round(time.Millisecond))
	if e.Bound > 0 {
		s += fmt.Sprintf(", past the %v retry bound", e.Bound)
	}
	return s + ": last: " + describe(e.Err)
}

func (e *RetryError) Unwrap() error { return e.Err }

// describe is an attempt's error, short: S3's status and code rather than
// the SDK's request IDs.
func describe(err error) string {
	var api smithy.APIError
	if st := statusOf(err); st != 0 && errors.As(err, &api) {
		if m := api.ErrorMessage(); m != "" {
			return fmt.Sprintf("status %d %s: %s", st, api.ErrorCode(), m)
		}
		return fmt.Sprintf("status %d %s", st, api.ErrorCode())
	}
	var send *smithyhttp.RequestSendError
	if errors.As(err, &send) {
		return "request not sent or no response: " + send.Err.Error()
	}
	return err.Error()
}

// statusOf is the HTTP status of the response an SDK error came with; 0
// if none came.
func statusOf(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// bodyError is a failure while reading a response's body: retried (from
// where it stopped) unless it is ours (errWrite).
type bodyError struct{ error }

func (e bodyError) Unwrap() error { return e.error }

var sdkRetryables = retry.IsErrorRetryables(retry.DefaultRetryables)

// retryable reports whether another attempt may succeed where err failed:
// throttling, 5xx, connection errors and timeouts, bodies cut short or
// stalled. A 404, 403 or 412 will not heal; a write error is ours.
func retryable(err error) bool {
	var be bodyError
	switch {
	case errors.Is(err, errWrite):
		return false
	case errors.Is(err, errNoResponse), errors.Is(err, errStalled), errors.Is(err, ErrShortBody), errors.As(err, &be):
		return true
	}
	return sdkRetryables.IsErrorRetryable(err) == aws.TrueTernary
}

// streak is an object failing: since it last worked (or since the call
// that met its first failure began), how many requests failed.
type streak struct {
	since, last time.Time
	failed      int
}

// deadline is when retrying u must end, for a call beginning now: the
// Timeout after its streak began (the zero time: no bound).
func (c *client) deadline(u string, now time.Time) time.Time {
	if c.retry.Timeout <= 0 {
		return time.Time{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.streaks[u]; s != nil && now.Sub(s.last) <= c.retry.Timeout {
		return s.since.Add(c.retry.Timeout)
	}
	return now.Add(c.retry.Timeout)
}

// failed records a failed request on u by a call that began at start; an
// attempt that brought bytes (progress) starts the streak again, as the
// object is flaky, not dead. It returns the streak after it.
func (c *client) failed(u string, start, now time.Time, progress bool) streak {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streaks[u]
	switch {
	case s == nil || (c.retry.Timeout > 0 && now.Sub(s.last) > c.retry.Timeout):
		s = &streak{since: start}
		c.streaks[u] = s
	case progress:
		s.since, s.failed = now, 0
	}
	s.failed++
	s.last = now
	return *s
}

// worked ends u's streak.
func (c *client) worked(u string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.streaks, u)
}

// call is one retrying call's state, for its progress lines.
type call struct {
	mu        sync.Mutex
	attempts  int
	last      error
	streaming bool // the current attempt has its response and reads the body
}

func (s *call) setStreaming(b bool) {
	s.mu.Lock()
	s.streaming = b
	s.mu.Unlock()
}

// attemptFunc makes one request: wait bounds its wait for a response;
// progress says it brought some bytes before it failed.
type attemptFunc func(ctx context.Context, wait time.Duration, st *call) (progress bool, err error)

// retrying runs attempt until it succeeds, fails in a way that retrying
// cannot help, or u's retries are spent (Retry.Attempts attempts that
// brought nothing, or Retry.Timeout since the object started failing),
// and returns nil or an *Error naming u.
func (c *client) retrying(ctx context.Context, op, u string, attempt attemptFunc) error {
	r := c.retry
	start := time.Now()
	deadline := c.deadline(u, start)
	st := &call{}
	if r.Report > 0 {
		stop := c.reportWhileFailing(op, u, start, deadline, st)
		defer stop()
	}
	counted := 0 // attempts that brought nothing
	for {
		// The wait for a response is cut to what is left of the bound, but
		// not below a tenth of it: an attempt cut at once would only
		// report its own cut instead of what the server does.
		wait := r.Stall
		if !deadline.IsZero() {
			if left := time.Until(deadline); left > 0 {
				wait = min(wait, max(left, r.Timeout/10))
			} // else: past the bound, one attempt with the full wait
		}
		progress, err := attempt(ctx, wait, st)
		if err == nil {
			c.worked(u)
			return nil
		}
		if ctx.Err() != nil {
			return fail(op, u, context.Cause(ctx))
		}
		if !retryable(err) {
			return fail(op, u, err)
		}
		now := time.Now()
		sk := c.failed(u, start, now, progress)
		st.mu.Lock()
		st.attempts++
		st.last = err
		attempts := st.attempts
		st.mu.Unlock()
		if progress {
			if r.Timeout > 0 {
				deadline = now.Add(r.Timeout)
			}
		} else {
			counted++
		}
		past := !deadline.IsZero() && !now.Before(deadline)
		if counted >= r.Attempts || past {
			re := &RetryError{Attempts: attempts, Total: sk.failed, Failing: now.Sub(sk.since), Status: statusOf(err), Err: err}
			if past && counted < r.Attempts {
				re.Bound = r.Timeout
			}
			return fail(op, u, re)
		}
		d := r.backoff(counted)
		if progress {
			d = r.backoff(0)
		}
		if !deadline.IsZero() {
			d = min(d, time.Until(deadline))
		}
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return fail(op, u, context.Cause(ctx))
			case <-t.C:
			}
		}
	}
}

// reportWhileFailing logs a line every Retry.Report while the call is
// waiting for a response or between failed attempts (not while a body
// flows), naming the object and the attempts so far, so that a server
// that does not answer, or answers errors, is seen long before the call
// gives up. It returns the function that stops it.
func (c *client) reportWhileFailing(op, u string, start, deadline time.Time, st *call) func() {
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	report := func() {
		st.mu.Lock()
		attempts, last, streaming := st.attempts, st.last, st.streaming
		st.mu.Unlock()
		if !streaming {
			args := []any{"op", op, "object", u, "attempts", attempts, "for", time.Since(start).Round(time.Millisecond)}
			if last != nil {
				args = append(args, "last", describe(last))
			} else {
				args = append(args, "last", "waiting for the first response")
			}
			if !deadline.IsZero() {
				args = append(args, "gives_up_in", max(0, time.Until(deadline)).Round(time.Millisecond))
			}
			log().Warn("objstore: object not answering yet; retrying", args...)
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(c.retry.Report)
		}
	}
	mu.Lock()
	t = time.AfterFunc(c.retry.Report, report)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// noResponse makes ctx's attempt fail with errNoResponse after wait;
// call the returned function once the response has come.
func noResponse(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, wait, fmt.Errorf("%w within %v", errNoResponse, wait.Round(time.Millisecond)))
}

// attemptErr prefers the cause of an attempt's cancellation (no
// response, stalled) to the SDK's "context canceled".
func attemptErr(parent, actx context.Context, err error) error {
	if parent.Err() == nil {
		if cause := context.Cause(actx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
			return cause
		}
	}
	return err
}

// shortBody names a body that ended early: got of the want bytes asked
// for from byte off came; rerr is how it ended (io.EOF,
// io.ErrUnexpectedEOF).
func shortBody(got, want, off int64, rerr error) error {
	if rerr == nil || rerr == io.EOF {
		return fmt.Errorf("%w: %d of %d bytes came (from byte %d)", ErrShortBody, got, want, off)
	}
	return fmt.Errorf("%w: %d of %d bytes came (from byte %d): %w", ErrShortBody, got, want, off, rerr)
}
