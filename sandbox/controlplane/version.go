package controlplane

import (
	"fmt"
	"runtime/debug"
	_ "unsafe" // for go:linkname

	"k8s.io/component-base/version"
)

// kubernetesModule is the module whose kube-apiserver the sandbox runs.
const kubernetesModule = "k8s.io/kubernetes"

// gitVersion is the version stamp Kubernetes' release builds set with
// -ldflags "-X k8s.io/component-base/version.gitVersion=...". Built from the
// module cache it keeps its placeholder, v0.0.0-master+$Format:%H$, which the
// API server then reports at /version; clients that parse the server version
// (Kueue's controller manager, controller-runtime's version checks) refuse it.
//
//go:linkname gitVersion k8s.io/component-base/version.gitVersion
var gitVersion string

// stampVersion makes the process report the Kubernetes version it was built
// with, as a release build's -X stamp would: the apiserver (and the
// scheduler and controllers beside it) read it through version.Get. It sets
// the stamp first because version.SetDynamicVersion only accepts versions
// of the stamp's major.minor.patch. Idempotent; the sandbox's processes
// carry one kube-apiserver version, so the stamp never changes once set.
func stampVersion() (string, error) {
	v, err := builtKubernetesVersion()
	if err != nil {
		return "", err
	}
	if version.Get().GitVersion == v {
		return v, nil
	}
	gitVersion = v
	if err := version.SetDynamicVersion(v); err != nil {
		return "", fmt.Errorf("version stamp %s: %w", v, err)
	}
	return v, nil
}

// builtKubernetesVersion is the version of k8s.io/kubernetes linked into
// this binary, from its build information (the one go.mod pins).
func builtKubernetesVersion() (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", fmt.Errorf("no build information in this binary: cannot tell which %s it runs", kubernetesModule)
	}
	for _, m := range info.Deps {
		if m.Path != kubernetesModule {
			continue
		}
		if m.Replace != nil && m.Replace.Version != "" {
			return m.Replace.Version, nil
		}
		return m.Version, nil
	}
	return "", fmt.Errorf("%s is not in this binary's build information", kubernetesModule)
}
