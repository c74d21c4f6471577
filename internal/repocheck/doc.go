// Package repocheck holds repository-wide checks that run as tests: no
// tracked file over 1 MiB, no reference to files outside the repository or
// to tracker issues, and no relative link in README.md or docs/*.md that
// does not resolve. It has no code of its own.
package repocheck
