// Package deploy holds the kube-system manifests of the autoscaler (applied
// with `kubectl apply -k deploy/`) and the checks that keep them, and the Helm
// chart rendered from charts/, safe: least-privilege RBAC, a hardened pod, and
// Secret mounts that match the cloud config. Nothing in the binary imports it.
package deploy

import (
	"bytes"
	"embed"
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// kustomization is the part of kustomization.yaml the checks read.
type kustomization struct {
	Namespace string   `json:"namespace"`
	Resources []string `json:"resources"`
}

// Resources returns the files kustomization.yaml lists, in order.
func Resources() ([]string, error) {
	raw, err := files.ReadFile("kustomization.yaml")
	if err != nil {
		return nil, err
	}
	var k kustomization
	if err := yaml.Unmarshal(raw, &k); err != nil {
		return nil, err
	}
	return k.Resources, nil
}

// Objects decodes every manifest kustomization.yaml lists into typed objects.
func Objects() ([]runtime.Object, error) {
	names, err := Resources()
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	for _, name := range names {
		raw, err := files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("kustomization lists %s: %w", name, err)
		}
		objs, err := Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// Decode splits a multi-document YAML stream and decodes each non-empty
// document into its typed Kubernetes object (strictly: unknown fields fail).
func Decode(data []byte) ([]runtime.Object, error) {
	var out []runtime.Object
	for i, doc := range docSeparator.Split(string(data), -1) {
		if len(bytes.TrimSpace(stripComments([]byte(doc)))) == 0 {
			continue
		}
		obj, _, err := strictDecoder.Decode([]byte(doc), nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// strictDecoder rejects unknown fields, so a misspelt key (e.g.
// "readOnlyRootFileSystem") fails the tests instead of being dropped silently.
var strictDecoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '#' {
			continue
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
