//go:build !unix

package testkit

import "errors"

const canLimitFileSize = false

func limitFileSize(uint64) error { return errors.New("no file size limit here") }
