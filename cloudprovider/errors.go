package cloudprovider

import (
	"errors"
	"fmt"
	"time"
)

// AccountLimitError is a size change the cloud refused because an
// account-wide quota would be exceeded (DigitalOcean's droplet limit, say).
// Every node group draws on the same quota, so the core backs off scale-ups
// of all of them rather than trying one group after another.
type AccountLimitError struct {
	// Code names the limit in metrics, events and the status ConfigMap
	// (the failed_scale_ups_total reason).
	Code string
	// Message is the cloud's own words, for the operator.
	Message string
	// Err is the whole error (request, status, request ID).
	Err error
}

func (e *AccountLimitError) Error() string { return e.Err.Error() }
func (e *AccountLimitError) Unwrap() error { return e.Err }

// AsAccountLimit returns the AccountLimitError in err's chain, if any.
func AsAccountLimit(err error) (*AccountLimitError, bool) {
	var al *AccountLimitError
	ok := errors.As(err, &al)
	return al, ok
}

// SizeUnavailableError is a size change or creation the cloud refused, or
// the provider did not send, because a machine type cannot be had in the
// region now (no capacity, not offered). It is learnt per machine type and
// region, not per node group: every group of that type would get the same
// answer until Until, so the core tries another type at once instead of
// backing off this group and learning the next one group by group.
type SizeUnavailableError struct {
	// Size is the machine type (a DigitalOcean size slug), Region where.
	Size, Region string
	// Until: the provider sends no request for the size before then.
	Until time.Time
	// Message is the cloud's own words, or why no request was sent.
	Message string
	// Err is the whole error; nil when no request was sent.
	Err error
}

func (e *SizeUnavailableError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return fmt.Sprintf("size %s is unavailable in %s until %s: %s", e.Size, e.Region, e.Until.UTC().Format(time.RFC3339), e.Message)
}
func (e *SizeUnavailableError) Unwrap() error { return e.Err }

// AsSizeUnavailable returns the SizeUnavailableError in err's chain, if any.
func AsSizeUnavailable(err error) (*SizeUnavailableError, bool) {
	var su *SizeUnavailableError
	ok := errors.As(err, &su)
	return su, ok
}
