package config

import (
	goflag "flag"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json, as upstream
	"k8s.io/klog/v2"
)

// Logging is upstream's logging set-up: klog's flags, then component-base's
// (--logging-format, --log-flush-frequency, -v, --vmodule, ...) and
// --feature-gates with the logging feature gates.
type Logging struct {
	config *logsapi.LoggingConfiguration
	gates  featuregate.MutableVersionedFeatureGate
}

func addLoggingFlags(fs *pflag.FlagSet) *Logging {
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	// Upstream opts into klog's newer behaviour, where --stderrthreshold
	// applies with --logtostderr too, and lowers the threshold to INFO, so by
	// default every line still reaches stderr.
	_ = klogFlags.Set("legacy_stderr_threshold_behavior", "false")
	_ = klogFlags.Set("stderrthreshold", "INFO")

	l := &Logging{config: logsapi.NewLoggingConfiguration(), gates: featuregate.NewFeatureGate()}
	if err := logsapi.AddFeatureGates(l.gates); err != nil {
		panic(fmt.Sprintf("logging feature gates: %v", err)) // a programming error
	}
	logsapi.AddFlags(l.config, fs)
	l.gates.AddFlag(fs)
	// -v and --vmodule are component-base's; klog's own are skipped.
	fs.AddGoFlagSet(klogFlags)
	return l
}

// Apply sets up logging as the parsed flags say. Call it once, right after
// parsing, before logging anything.
func (l *Logging) Apply() error {
	logs.InitLogs()
	if err := logsapi.ValidateAndApply(l.config, l.gates); err != nil {
		return fmt.Errorf("logging flags: %v", err)
	}
	return nil
}

// Format is the --logging-format in effect.
func (l *Logging) Format() string { return l.config.Format }
