package digitalocean

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// Response body limits. DigitalOcean's real answers are far smaller (a
// page of 200 node pools with their nodes is well under 1 MiB); the caps
// keep a broken or hostile server from making one answer cost hundreds of
// MiB.
const (
	maxResponseBody = 8 << 20
	// maxErrorBody caps an error answer: only maxErrorText bytes of its
	// message are kept anyway.
	maxErrorBody = 64 << 10
)

// errBodyTooLarge is returned by reads past a body's cap.
var errBodyTooLarge = errors.New("response body too large")

// attemptRecord is what the transport saw of one attempt: godo returns no
// response when a body fails to decode, so the status is kept here.
type attemptRecord struct {
	status   atomic.Int32
	overflow atomic.Bool
}

type attemptKey struct{}

func withAttemptRecord(ctx context.Context, r *attemptRecord) context.Context {
	return context.WithValue(ctx, attemptKey{}, r)
}

// guardTransport caps response bodies and records each answer's status.
type guardTransport struct{ base http.RoundTripper }

func (t guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp == nil {
		return resp, err
	}
	rec, _ := req.Context().Value(attemptKey{}).(*attemptRecord)
	if rec != nil {
		rec.status.Store(int32(resp.StatusCode))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		resp.Body = &cappedBody{rc: resp.Body, left: maxErrorBody, rec: rec}
		return resp, nil
	}
	// A good answer is read here, in chunks, so that an over-size one costs
	// its cap once and is refused before any decoding buffer grows.
	data, rerr := readCapped(resp.Body, maxResponseBody)
	_ = resp.Body.Close()
	if errors.Is(rerr, errBodyTooLarge) && rec != nil {
		rec.overflow.Store(true)
	}
	var body io.Reader = bytes.NewReader(data)
	if rerr != nil {
		body = io.MultiReader(body, errReader{rerr})
	}
	resp.Body = io.NopCloser(body)
	return resp, nil
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// readCapped reads r to the end, failing with errBodyTooLarge past limit
// bytes. Fixed-size chunks, joined once at the end, keep the allocations
// near the size read rather than the doubling of a growing buffer.
func readCapped(r io.Reader, limit int) ([]byte, error) {
	const chunkSize = 32 << 10
	var chunks [][]byte
	total := 0
	for {
		chunk := make([]byte, chunkSize)
		n, err := io.ReadFull(r, chunk)
		if n > 0 {
			chunks = append(chunks, chunk[:n])
			total += n
		}
		if total > limit {
			return nil, fmt.Errorf("%w: over %d bytes", errBodyTooLarge, limit)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	return bytes.Join(chunks, nil), nil
}

// cappedBody ends an error answer's body at limit bytes (its status and
// request ID matter, its text is cut to maxErrorText anyway), noting the
// overflow.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
	rec  *attemptRecord
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly limit bytes from a longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n == 0 && err != nil {
			return 0, err
		}
		if b.rec != nil {
			b.rec.overflow.Store(true)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// checkRedirect follows a redirect only to the same scheme and host: the
// token is added below net/http's redirect handling, which therefore cannot
// strip it, so any other target (another host, or plain http on the same
// host) would receive it.
func checkRedirect(req *http.Request, via []*http.Request) error {
	from := via[0].URL
	if !strings.EqualFold(req.URL.Host, from.Host) {
		return fmt.Errorf("refusing a redirect from %s to another host, %s", from.Host, req.URL.Host)
	}
	if req.URL.Scheme != from.Scheme {
		return fmt.Errorf("refusing a redirect from %s://%s to %s://%s: the scheme must stay %s", from.Scheme, from.Host, req.URL.Scheme, req.URL.Host, from.Scheme)
	}
	if len(via) >= 10 {
		return fmt.Errorf("stopped after %d redirects", len(via))
	}
	return nil
}
