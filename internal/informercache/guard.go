package informercache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// trimmedManager names the mark of a trimmed copy. It stands where the
// object's managedFields were (nothing in the autoscaler reads them), so it
// costs no memory: every marked object points at the one entry. Its text
// is what RefuseTrimmedWrites looks for in a request's body, in JSON and
// protobuf alike.
const trimmedManager = "doks-autoscaler.informercache/trimmed-copy-do-not-write"

// trimmedMark is the managedFields of every marked object. Clipped: an
// append never writes into the shared entry.
var trimmedMark = []metav1.ManagedFieldsEntry{{Manager: trimmedManager}}[:1:1]

func mark(o metav1.Object) { o.SetManagedFields(trimmedMark) }

// IsTrimmed tells whether o is, or was copied from, a trimmed object of
// the cache (a pod made from a trimmed template included).
func IsTrimmed(o metav1.Object) bool {
	for _, e := range o.GetManagedFields() {
		if e.Manager == trimmedManager {
			return true
		}
	}
	return false
}

// ErrTrimmedWrite is the error of a write that carried a trimmed object.
var ErrTrimmedWrite = errors.New("informercache: refusing to send a trimmed cache copy to the API server; read the live object to write it")

// RefuseTrimmedWrites wraps a Kubernetes client's transport
// (rest.Config.Wrap): a create, update or patch whose body carries a
// trimmed object fails with ErrTrimmedWrite and never reaches the API
// server, which would otherwise store the object without what the cache
// dropped (a pod's security context, a container's env). Reads pass as
// they are; a write costs a scan of its body.
func RefuseTrimmedWrites(rt http.RoundTripper) http.RoundTripper {
	return refuseTrimmed{next: rt}
}

type refuseTrimmed struct{ next http.RoundTripper }

var trimmedManagerBytes = []byte(trimmedManager)

func (r refuseTrimmed) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody || !writes(req.Method) {
		return r.next.RoundTrip(req)
	}
	body, req, err := readBody(req)
	if err != nil {
		return nil, err
	}
	if bytes.Contains(body, trimmedManagerBytes) {
		req.Body.Close()
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ErrTrimmedWrite)
	}
	return r.next.RoundTrip(req)
}

func writes(method string) bool {
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch
}

// readBody returns the request's body and a request that still has it to
// send: a copy from GetBody when the request can make one (client-go's
// can), else the body read and put back on a clone.
func readBody(req *http.Request) ([]byte, *http.Request, error) {
	if req.GetBody != nil {
		rc, err := req.GetBody()
		if err == nil {
			defer rc.Close()
			body, err := io.ReadAll(rc)
			if err == nil {
				return body, req, nil
			}
		}
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, req, err
	}
	clone := req.Clone(req.Context())
	clone.Body = io.NopCloser(bytes.NewReader(body))
	clone.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return body, clone, nil
}
