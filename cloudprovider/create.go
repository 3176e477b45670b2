package cloudprovider

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
