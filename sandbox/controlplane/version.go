package controlplane

import (
	"fmt"
	_ "unsafe" // for go:linkname

	"k8s.io/component-base/version"
)

// KubernetesVersion is the version of the k8s.io/kubernetes module go.mod
// requires, whose kube-apiserver the sandbox runs (a test keeps the two
// equal). Test binaries carry no module versions in their build
// information, so it is written here.
const KubernetesVersion = "v1.37.2"

// gitVersion is the version stamp Kubernetes' release builds set with
// -ldflags "-X k8s.io/component-base/version.gitVersion=...". Built from the
// module cache it keeps its placeholder, v0.0.0-master+$Format:%H$, which the
// API server then reports at /version; clients that parse the server version
// (Kueue's controller manager, controller-runtime's version checks) refuse it.
//
//go:linkname gitVersion k8s.io/component-base/version.gitVersion
var gitVersion string

// stampVersion makes the process report KubernetesVersion, as a release
// build's -X stamp would: the apiserver (and the scheduler and controllers
// beside it) read it through version.Get. It sets the stamp first because
// version.SetDynamicVersion only accepts versions of the stamp's
// major.minor.patch. Idempotent.
func stampVersion() (string, error) {
	v := KubernetesVersion
	if version.Get().GitVersion == v {
		return v, nil
	}
	gitVersion = v
	if err := version.SetDynamicVersion(v); err != nil {
		return "", fmt.Errorf("version stamp %s: %w", v, err)
	}
	return v, nil
}
