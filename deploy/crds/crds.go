// Package crds holds the CustomResourceDefinitions this autoscaler reads
// (deploy/crds/*.yaml), embedded for the sandbox, which installs them as
// `kubectl apply -k deploy/` and the chart's crds/ do. The autoscaler's
// binary does not import it.
package crds

import (
	"embed"
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The CRD files, not kustomization.yaml (the component listing them).
//
//go:embed autoscaling.x-k8s.io_*.yaml
var files embed.FS

// All returns the CRDs.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(files, "autoscaling.x-k8s.io_*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, n := range names {
		raw, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("deploy/crds/%s: %w", n, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
