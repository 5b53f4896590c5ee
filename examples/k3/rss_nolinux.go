//go:build !linux

package main

func rssFile() int64 { return 0 }
