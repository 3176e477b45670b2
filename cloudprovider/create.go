package cloudprovider

import "errors"

// SizedCreator is implemented by not-yet-existing node groups whose cloud
// creates a group together with its first nodes. Upstream's contract
// creates a group (Create) and then grows it (IncreaseSize); a DOKS pool
// cannot be created empty, so the core asks for the nodes the estimate
// needs in the creating call instead, one API call rather than two.
type SizedCreator interface {
	// CreateWithSize creates the group with count nodes and returns it as
	// an existing group.
	CreateWithSize(count int) (NodeGroup, error)
}

// ErrCreationStopped is wrapped by GetAvailableMachineTypes while the
// provider refuses to create node groups for a reason only the operator or
// time can clear (it could not recognise the groups it would create, or a
// creation it sent never showed up); the error says which. The core then
// plans no new group; the reason is also among the provider's Problems.
var ErrCreationStopped = errors.New("node group creation stopped")
