// Package manifestcheck checks the autoscaler's shipped installation: the
// kustomize manifests in deploy/ and the Helm chart rendered from charts/. Both
// must satisfy the binary they run (every flag in the Deployment's args is one
// the binary defines, the Secret files cloud.json names are mounted, the probes
// reach the health-check port) and the least-privilege policy (RBAC grants only
// what the code uses, a hardened non-root pod, no real token in the repository),
// because a mistake there shows up only after `kubectl apply`, as a Forbidden
// error or a crash-looping pod. Only tests import it; the binary does not.
package manifestcheck

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Dir is the repository's deploy/ directory. deploy/'s Go package embeds only
// the RBAC files (for the preflight check), so the files are read from the
// source tree, found from this file's own path: the checks run in tests, where
// the tree is there.
func Dir() string {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		panic("manifestcheck: cannot locate its own source file")
	}
	return filepath.Join(filepath.Dir(self), "..", "..", "deploy")
}

// readFile reads one file of deploy/.
func readFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(Dir(), name))
}

// kustomization is the part of kustomization.yaml (or of a component's) the
// checks read.
type kustomization struct {
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Components []string `json:"components"`
}

// Resources returns the files kustomization.yaml lists, in order, then those
// of the components it includes (deploy/crds), as kubectl apply -k applies
// them.
func Resources() ([]string, error) {
	return resourcesOf(".")
}

func resourcesOf(dir string) ([]string, error) {
	raw, err := readFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k kustomization
	if err := yaml.Unmarshal(raw, &k); err != nil {
		return nil, err
	}
	var out []string
	for _, r := range k.Resources {
		out = append(out, filepath.Join(dir, r))
	}
	for _, c := range k.Components {
		rs, err := resourcesOf(filepath.Join(dir, c))
		if err != nil {
			return nil, fmt.Errorf("component %s: %w", c, err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// Objects decodes every manifest kustomization.yaml lists into typed objects.
func Objects() ([]kruntime.Object, error) {
	names, err := Resources()
	if err != nil {
		return nil, err
	}
	var out []kruntime.Object
	for _, name := range names {
		raw, err := readFile(name)
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
func Decode(data []byte) ([]kruntime.Object, error) {
	var out []kruntime.Object
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
// CustomResourceDefinitions (deploy/crds/) decode too.
var strictDecoder = func() kruntime.Decoder {
	s := kruntime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}()

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
