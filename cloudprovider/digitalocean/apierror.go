package digitalocean

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/digitalocean/godo"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
)

// ErrorCodeDropletLimit is the code of DigitalOcean's droplet-limit refusal
// in metrics (failed_scale_ups_total{reason}), events and the status
// ConfigMap's backoff info.
const ErrorCodeDropletLimit = "dropletLimitExceeded"

// maxErrorText bounds the part of an API error body kept in an error: the
// text ends up in logs, events, the status ConfigMap and metrics, and a
// broken or hostile server could send megabytes.
const maxErrorText = 512

// apiError is a DigitalOcean error answer, reduced to what an operator
// needs: the request, the status, the request ID and the start of the
// message.
type apiError struct {
	Method     string
	URL        string // scheme://host/path, no query
	StatusCode int
	RequestID  string
	Message    string // at most maxErrorText bytes, control characters replaced
}

func (e *apiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %d %s", e.Method, e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request %s)", e.RequestID)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.StatusCode == http.StatusNotFound {
		b.WriteString(" (check cluster_id and url in the cloud config)")
	}
	return b.String()
}

// asAPIError converts godo's error answer; other errors are returned as
// they are.
func asAPIError(err error) error {
	var er *godo.ErrorResponse
	if !errors.As(err, &er) || er.Response == nil {
		return err
	}
	out := &apiError{StatusCode: er.Response.StatusCode, RequestID: truncateText(er.RequestID, 64)}
	if r := er.Response.Request; r != nil && r.URL != nil {
		out.Method = r.Method
		out.URL = r.URL.Scheme + "://" + r.URL.Host + r.URL.EscapedPath()
	}
	msg := er.Message
	if msg == "" && er.NestedError != nil {
		msg = er.NestedError.Message
	}
	out.Message = truncateText(msg, maxErrorText)
	return out
}

// asDropletLimit marks DigitalOcean's refusal of new droplets at the
// account's droplet limit (422, "creating this/these droplet(s) will exceed
// your droplet limit") as a cloudprovider.AccountLimitError; other errors
// are returned as they are. The limit is the account's, not the pool's:
// every pool of every cluster of the account gets the same answer.
func asDropletLimit(err error) error {
	var ae *apiError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(strings.ToLower(ae.Message), "droplet limit") {
		return err
	}
	return &cloudprovider.AccountLimitError{Code: ErrorCodeDropletLimit, Message: ae.Message, Err: err}
}

// truncateText keeps at most n bytes of s, with
// control characters replaced so that one error stays one log line.
func truncateText(s string, n int) string {
	cut := len(s) > n
	if cut {
		s = s[:n]
		// Drop a rune cut in half rather than show a replacement for it.
		for i := 0; i < utf8.UTFMax && len(s) > 0 && !utf8.ValidString(s); i++ {
			s = s[:len(s)-1]
		}
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	if cut {
		s += fmt.Sprintf("… (truncated to %d bytes)", n)
	}
	return s
}

// checkPathID refuses an ID from the API that could change the path of a
// request built from it ("/", "?", "#", "%", "\", ".", "..", spaces or
// control characters), so that no request leaves
// /v2/kubernetes/clusters/<cluster id>/. DOKS IDs are UUIDs and pool names
// DNS labels, so nothing real is refused.
func checkPathID(field, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%s is empty", field)
	case v == "." || v == "..":
		return fmt.Errorf("%s %q is a path element", field, v)
	case len(v) > 255:
		return fmt.Errorf("%s is %d bytes long", field, len(v))
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f || strings.ContainsRune(`/?#%\`, r) {
			return fmt.Errorf("%s %q contains %q, which would change the request path", field, truncateText(v, 64), r)
		}
	}
	return nil
}
