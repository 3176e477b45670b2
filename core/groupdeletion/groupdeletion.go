// Package groupdeletion is what deleting an empty node group that node
// autoprovisioning created did, and the recorder it is reported through.
// The deleting is the core's (core/nodegroups.go: once per group, refusals
// backed off); the reporter (core/report) implements Recorder. It is a
// package of its own because core/report, which core imports, cannot
// import core.
package groupdeletion

import "time"

// Outcome is what asking the provider to delete an empty autoprovisioned
// node group did.
type Outcome struct {
	GroupID string
	// Err is the provider's refusal (nil: deleted); NextAttempt is when
	// the deletion is asked again after it.
	Err         error
	NextAttempt time.Time
}

// Recorder records each group deletion asked for.
type Recorder interface {
	NodeGroupDeleted(Outcome)
}
