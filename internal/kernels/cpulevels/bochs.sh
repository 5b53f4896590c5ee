#!/usr/bin/env bash
# bochs.sh runs one package's tests on an emulated AVX-512 CPU (Bochs), so the AVX-512 kernels can
# be tested on a machine without AVX-512. qemu-user (the cpulevels test) has no AVX-512; Bochs
# emulates it but only as a whole PC, so this boots a small Linux whose init runs the test binary.
#
#	internal/kernels/cpulevels/bochs.sh [-m MODEL] PKG [TEST FLAGS...]
#	internal/kernels/cpulevels/bochs.sh internal/kernels/dot -test.run TestAsmKernelsBitwise
#
# PKG is a package directory of this module; the flags go to its test binary (-test.v is added;
# no flag may contain a space).
# It exits 0 when the guest printed PASS, 1 otherwise, and leaves the guest's console in
# $K3_BOCHS_DIR/serial.out. Bochs runs at about 60 M instructions a second: pick a few tests.
# Before PKG's tests the guest runs internal/kernels/isacheck's, which checks the AVX-512
# instructions the kernels use against their SDM definitions; the script then names any the
# emulator gets wrong, so that a failure of PKG's tests can be told from the emulator's.
#
# MODEL is Bochs's CPU: skylake_x (default; AVX-512 F, CD, BW, DQ, VL) or icelake (adds VBMI, VBMI2,
# GFNI). The instruction check finds three faults in Bochs 2.7: VGF2P8AFFINEQB returns the
# complement of every byte; VPEXPANDB under a partial mask misplaces bytes (a selected byte came
# back 0); an EVEX gather with its index in Z16-Z31 raises SIGILL, so the MXFP4 AVX-512 mat-mul
# (offsets in Z30) cannot run under either model. Go's Green Tea collector uses GFNI and corrupted
# the heap under icelake, so the test binaries are built with GOEXPERIMENT=nogreenteagc for it;
# lossless12's AVX-512 kernel uses GFNI and VPEXPANDB and fails there (NaN) while its tests pass on
# the project's AVX-512 Xeon. A failure of code using a named instruction proves nothing; a pass
# is worth having.
#
# Needs: bochs (Debian: bochs bochsbios vgabios), isolinux and syslinux-common, xorriso, cpio,
# and a Linux bzImage in $K3_BOCHS_KERNEL. Without one, the first run builds it from Debian's
# linux-source-6.1 (apt-get download; needs make, gcc, flex, bison, bc, libelf-dev; about three
# minutes on two cores) as a tinyconfig with what a Go binary needs. Debian's own 6.1 kernel does
# not get past early boot in Bochs 2.7 (a recursive page fault at its first interrupt return);
# the tinyconfig one boots.
#
# Boot parameters, each found necessary: clearcpuid=xsaves,xsavec (Bochs reports the compacted
# XSAVE size of the standard format, and the kernel then turns XSAVE, and AVX, off), pku (Bochs
# misplaces its state), and for icelake la57, umip, rdpid, fsgsbase, vaes, vpclmulqdq, sha_ni,
# tsc_deadline_timer, fsrm, wbnoinvd (with them the kernel hangs where the skylake_x model boots).
set -euo pipefail

model=skylake_x
if [[ ${1-} == -m ]]; then
	model=$2
	shift 2
fi
if [[ $# -lt 1 ]]; then
	sed -n '2,12p' "$0" >&2
	exit 2
fi
pkg=$1
shift
root=$(cd "$(dirname "$0")/../../.." && pwd)
work=${K3_BOCHS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/k3-bochs}
mkdir -p "$work"

clear=pku,xsaves,xsavec
experiment=
case $model in
skylake_x) cpu=corei7_skylake_x ;;
icelake)
	cpu=corei7_icelake_u
	clear=$clear,la57,umip,rdpid,fsgsbase,vaes,vpclmulqdq,sha_ni,tsc_deadline_timer,fsrm,wbnoinvd
	experiment=nogreenteagc
	;;
*)
	echo "bochs.sh: model $model: want skylake_x or icelake" >&2
	exit 2
	;;
esac

kernel=${K3_BOCHS_KERNEL:-$work/bzImage}
if [[ ! -f $kernel ]]; then
	echo "bochs.sh: building a tinyconfig kernel into $kernel" >&2
	src=$work/src
	rm -rf "$src" && mkdir -p "$src"
	(cd "$src" && apt-get download linux-source-6.1 >/dev/null &&
		dpkg-deb --fsys-tarfile linux-source-6.1_*.deb | tar -x --wildcards './usr/src/linux-source-6.1.tar.xz' &&
		tar -xf usr/src/linux-source-6.1.tar.xz)
	(cd "$src/linux-source-6.1" && make tinyconfig >/dev/null &&
		./scripts/config -e 64BIT -e PRINTK -e EARLY_PRINTK -e TTY -e SERIAL_8250 -e SERIAL_8250_CONSOLE \
			-e BLK_DEV_INITRD -e RD_GZIP -e BINFMT_ELF -e FUTEX -e EPOLL -e POSIX_TIMERS -e PROC_FS \
			-e SYSFS -e MULTIUSER -e SHMEM -e TMPFS -e HIGH_RES_TIMERS -e X86_TSC -d PAGE_TABLE_ISOLATION \
			-e SIGNALFD -e TIMERFD -e EVENTFD -e ADVISE_SYSCALLS -e MEMBARRIER -e RSEQ &&
		make olddefconfig >/dev/null && make -j"$(nproc)" bzImage >/dev/null)
	cp "$src/linux-source-6.1/arch/x86/boot/bzImage" "$kernel"
	rm -rf "$src"
fi

guest=$work/guest
rm -rf "$guest" && mkdir -p "$guest/root/dev" "$guest/root/tmp" "$guest/root/pkg" "$guest/init" "$guest/iso/isolinux"

# The guest's init: mounts /proc, runs /isa (the instruction check) and then /t with the
# arguments in /args from /pkg (the package's files, for testdata), then powers the guest off.
cat >"$guest/init/main.go" <<'EOF'
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

func main() {
	_ = os.MkdirAll("/proc", 0o555)
	_ = syscall.Mount("proc", "/proc", "proc", 0, "")
	run := func(bin, dir string, args ...string) error {
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr, cmd.Dir = os.Stdout, os.Stdout, dir
		cmd.Env = []string{"HOME=/tmp", "TMPDIR=/tmp"}
		return cmd.Run()
	}
	fmt.Printf("bochs guest: instruction check exited: %v\n", run("/isa", "/", "-test.v"))
	b, _ := os.ReadFile("/args")
	fmt.Printf("bochs guest: test binary exited: %v\n", run("/t", "/pkg", strings.Fields(string(b))...))
	// The serial port drains after write returns: power off at once and the last lines are lost.
	time.Sleep(2 * time.Second)
	syscall.Sync()
	_ = syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
}
EOF
printf 'module bochsinit\n\ngo 1.26\n' >"$guest/init/go.mod"
(cd "$guest/init" && CGO_ENABLED=0 go build -o "$guest/root/init" .)
(cd "$root" && CGO_ENABLED=0 GOEXPERIMENT=$experiment go test -c -o "$guest/root/t" "./$pkg" &&
	CGO_ENABLED=0 GOEXPERIMENT=$experiment go test -c -o "$guest/root/isa" ./internal/kernels/isacheck)
cp -r "$root/$pkg/." "$guest/root/pkg/"
echo "-test.v $*" >"$guest/root/args"
mknod "$guest/root/dev/console" c 5 1
mknod "$guest/root/dev/null" c 1 3
(cd "$guest/root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$guest/iso/isolinux/initrd.gz"
cp "$kernel" "$guest/iso/isolinux/vmlinuz"
cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 "$guest/iso/isolinux/"
cat >"$guest/iso/isolinux/isolinux.cfg" <<EOF
DEFAULT k3
LABEL k3
  KERNEL vmlinuz
  APPEND initrd=initrd.gz console=ttyS0,115200 earlyprintk=serial,ttyS0,115200 clearcpuid=$clear
EOF
xorriso -as mkisofs -quiet -o "$guest/boot.iso" -b isolinux/isolinux.bin -c isolinux/boot.cat \
	-no-emul-boot -boot-load-size 4 -boot-info-table "$guest/iso" 2>/dev/null

# Bochs's Debian build stops in its debugger before the first instruction: "c" continues. The
# serial port is the guest's console; there is no display.
cat >"$guest/bochsrc" <<EOF
megs: 1536
cpu: model=$cpu, count=1, ips=200000000
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/bochs/VGABIOS-lgpl-latest
ata0-master: type=cdrom, path=$guest/boot.iso, status=inserted
boot: cdrom
com1: enabled=1, mode=file, dev=$work/serial.out
display_library: rfb, options="timeout=0"
speaker: enabled=0
sound: driver=dummy
log: $guest/bochs.log
panic: action=fatal
error: action=ignore
info: action=ignore
clock: sync=none
EOF
rm -f "$work/serial.out" "$guest/in"
mkfifo "$guest/in"
timeout "${K3_BOCHS_TIMEOUT:-3600}" bochs -q -f "$guest/bochsrc" <"$guest/in" >"$guest/bochs.stdout" 2>&1 &
pid=$!
exec 3>"$guest/in"
echo c >&3
while kill -0 "$pid" 2>/dev/null; do
	if grep -aq -E 'bochs guest: test binary exited|reboot: (System halted|Power down)|Kernel panic' "$work/serial.out" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true # timeout passes the signal on to bochs
		break
	fi
	sleep 2
done
exec 3>&-
wait "$pid" 2>/dev/null || true
# The instruction check's output ends at its exit line; the verdict is the package's, after it.
check=$(sed -n '1,/bochs guest: instruction check exited/p' "$work/serial.out")
tests=$(sed -n '/bochs guest: instruction check exited/,$p' "$work/serial.out")
wrong=$(grep -a -o -E -- '--- FAIL: TestInstructions/[^ ]+' <<<"$check" | sed 's|.*/||' | tr '\n' ' ' || true)
grep -a -E '^(=== RUN|--- |PASS|FAIL|ok|panic|fatal)|bochs guest' <<<"$tests" || true
if [[ -n $wrong ]]; then
	echo "bochs.sh: this emulated CPU gets wrong: ${wrong% } (internal/kernels/isacheck); a failure of code using them proves nothing"
elif ! grep -aq 'bochs guest: instruction check exited: <nil>' <<<"$check"; then
	echo "bochs.sh: the instruction check did not finish; see $work/serial.out"
fi
grep -aq 'bochs guest: test binary exited: <nil>' <<<"$tests" && ! grep -aq '^FAIL' <<<"$tests"
