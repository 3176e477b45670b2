package cloudprovider

import "errors"

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
