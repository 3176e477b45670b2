// Package e2e runs the production cluster-autoscaler binary against the local DOKS
// sandbox (in-process control plane, DOKS API simulator, node agent) and checks what a
// user would see: pools grown and shrunk, pods running, events, API failures survived.
//
//	go test ./test/e2e/ -v                  # builds the binary itself
//	CA_BINARY=bin/cluster-autoscaler go test ./test/e2e/ -v
package e2e
