// Package eventreasons holds a test over the whole tree: every event reason
// the autoscaler records is upstream's or listed as this project's own
// (testdata/upstream-1.36.1-events.tsv), and every upstream reason that
// applies on DigitalOcean is recorded.
package eventreasons
