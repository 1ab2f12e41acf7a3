"""Booted Debian guests for the package's DEP-8 tests (debian/tests): their disk images, the accelerator, and
autopkgtest run against them.

An image is made from Debian's archive, not downloaded: `debootstrap` of the release with its own kernel
(linux-image-amd64, initramfs-tools, systemd-sysv), every dependency of the .deb and of its tests (so that a
guest needs no network), autopkgtest's own testbed set-up (setup-testbed: a root shell on the second serial
port and virtio consoles, which autopkgtest-virt-qemu drives), then an ext4 file system made from the root
with `mkfs.ext4 -d` (no loop device, no partition table: the guest boots its kernel and initrd directly, with
root=/dev/vda). Images are kept under CACHE/guests by release and recipe (a changed recipe makes a new one)
and made again after IMAGE_MAX_AGE_DAYS, like the system tier's roots. autopkgtest-virt-qemu never writes to
an image: each test boots an overlay of it.

Why not autopkgtest-build-qemu: it needs vmdb2 with loop devices and partitions, and a bootloader; this is the
same testbed with fewer moving parts, and what autopkgtest boots is still an image of the release's packages
with its own kernel.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

from system.container import CACHE, MIRROR, _remove_root, _unmount_under

HERE = Path(__file__).resolve().parent
#: The --qemu-command autopkgtest runs (see its docstring).
QEMU_COMMAND = HERE / "qemu-command"
#: The virt server autopkgtest runs: autopkgtest-virt-qemu with its fixed allowances scaled (see its docstring).
VIRT_QEMU = HERE / "virt-qemu"
SETUP_TESTBED = Path("/usr/share/autopkgtest/setup-commands/setup-testbed")
#: What an image holds beyond minbase: a kernel that boots, systemd, what autopkgtest needs in the guest
#: (python3; apt-utils, with which it makes a repository of the .deb there), and every dependency of the
#: .deb and of debian/tests/control's tests.
PACKAGES = ("linux-image-amd64", "initramfs-tools", "systemd-sysv", "udev", "dbus", "kmod", "procps", "e2fsprogs",
            "apt-utils", "python3", "passwd", "util-linux", "python3-click", "python3-sdnotify", "python3-daemon",
            "python3-croniter", "python3-psycopg", "tzdata", "python3-flask", "python3-gunicorn", "python3-bcrypt",
            "python3-cffi-backend", "postgresql")
#: The ext4 file system's size (sparse: about 1 GB of it is used).
IMAGE_SIZE = "4G"
IMAGE_MAX_AGE_DAYS = 7
#: Files an image holds beyond its packages: the root file system, the name, the persistent journal's
#: folder (the last boot's journal, after a reboot), the 9p modules loaded at boot (autopkgtest mounts
#: its shared folder with 9p over virtio and allows that 10 s, which loading them under TCG can take),
#: autopkgtest's root shell (setup-testbed's autopkgtest@.service) weighted ten times a service's share of
#: the guest's CPU (the same allowances, when it is set up again after a reboot as the units enabled
#: before it start and work), and drivers not loaded.
FILES = {"etc/fstab": "/dev/vda / ext4 rw,errors=remount-ro 0 1\n",
         "etc/modules-load.d/autopkgtest-9p.conf": "9p\n9pnet_virtio\n",
         "etc/systemd/system/autopkgtest@.service.d/queuectl-guest.conf": "[Service]\nCPUWeight=1000\n",
         # Drivers udev would load for the emulated CPU's and board's devices just as autopkgtest opens its
         # shell (see DISABLED): nothing a test uses.
         "etc/modprobe.d/queuectl-guest.conf": "".join(f"blacklist {m}\n" for m in (
             "kvm", "kvm_amd", "kvm_intel", "pcspkr", "parport_pc", "ppdev", "bochs", "bochs_drm")),
         "var/log/journal/.keep": ""}
#: Units an image does not start at boot. Under TCG a booting guest's CPU is scarce, and autopkgtest allows
#: its shell fixed seconds (5 for a prompt) once the login prompt shows: the clusters of PostgreSQL (the
#: power-cut test enables them itself) and the timers that would fire at a first boot (apt's, a backup, a
#: scrub, a trim: nothing a test looks at) wait until asked.
DISABLED = ("postgresql.service", "e2scrub_reap.service", "apt-daily.timer", "apt-daily-upgrade.timer",
            "dpkg-db-backup.timer", "e2scrub_all.timer", "fstrim.timer")
#: Seconds a KVM guest has to print its kernel's first line before KVM is taken for unusable here.
KVM_PROBE_SECONDS = 20


class Image(NamedTuple):
    """A guest's disk image (raw ext4) and the kernel and initrd it boots."""

    disk: Path
    kernel: Path
    initrd: Path


def missing() -> str | None:
    """Why guests cannot be booted and tested here, or None."""
    if os.geteuid() != 0:
        return "needs root (debootstrap, and autopkgtest's image set-up)"
    for tool, package in (("qemu-system-x86_64", "qemu-system-x86"), ("qemu-img", "qemu-utils"),
                          ("autopkgtest", "autopkgtest"), ("debootstrap", "debootstrap"),
                          ("mkfs.ext4", "e2fsprogs")):
        if shutil.which(tool) is None:
            return f"{tool} is missing (apt-get install {package})"
    if not SETUP_TESTBED.exists():
        return f"{SETUP_TESTBED} is missing (apt-get install autopkgtest)"
    return None


def image(release: str) -> Image:
    """Return the image of Debian `release`, made now if there is none younger than IMAGE_MAX_AGE_DAYS (about
    3 minutes and 1 GB); concurrent runs wait on a lock while one makes it. Raises RuntimeError with the
    failing step's last lines."""
    recipe = "\n".join([release, MIRROR, "minbase", *PACKAGES, IMAGE_SIZE, repr(sorted(FILES.items())), *DISABLED,
                        hashlib.sha256(SETUP_TESTBED.read_bytes()).hexdigest()])
    home = CACHE / "guests" / f"{release}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"
    made = home / "made"
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f"{release}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (made.exists() and time.time() - made.stat().st_mtime < IMAGE_MAX_AGE_DAYS * 86400):
            _make(release, home, recipe)
    return Image(home / "disk.raw", home / "vmlinuz", home / "initrd.img")


def _run(what: str, argv: list[str], **kw) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, **kw)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")


def _make(release: str, home: Path, recipe: str) -> None:
    fresh = home.with_name(home.name + ".new")
    root = fresh / "root"
    _remove_root(fresh)
    fresh.mkdir(parents=True)
    try:
        _run(f"debootstrap {release}", ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
                                        release, str(root), MIRROR])
        for path, text in {**FILES, "etc/hostname": f"guest-{release}\n"}.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        env = {**os.environ, "AUTOPKGTEST_BUILD_QEMU": "1", "AUTOPKGTEST_KEEP_APT_SOURCES": "1",
               "DEBIAN_FRONTEND": "noninteractive"}
        _run("setup-testbed", [str(SETUP_TESTBED), str(root)], env=env)
        _run("systemctl disable", ["systemctl", f"--root={root}", "disable", *DISABLED])
    finally:
        _unmount_under(root)
    [kernel] = sorted((root / "boot").glob("vmlinuz-*"))
    [initrd] = sorted((root / "boot").glob("initrd.img-*"))
    shutil.copy(kernel, fresh / "vmlinuz")
    shutil.copy(initrd, fresh / "initrd.img")
    _run("mkfs.ext4", ["mkfs.ext4", "-q", "-F", "-L", "root", "-d", str(root), str(fresh / "disk.raw"), IMAGE_SIZE])
    _remove_root(root)
    (fresh / "made").write_text(recipe + "\n")
    for old in set(home.parent.glob(f"{release}-*")) - {fresh}:  # this recipe's last image, other recipes': 1 GB each
        _remove_root(old)
    fresh.rename(home)


_kvm: bool | None = None


def kvm_runs(image: Image) -> bool:
    """Whether a KVM guest runs here: /dev/kvm exists and `image`'s kernel, booted with KVM, prints its first
    line within KVM_PROBE_SECONDS (on some machines /dev/kvm opens but a guest never runs). Asked once."""
    global _kvm
    if _kvm is None:
        _kvm = False
        if os.path.exists("/dev/kvm"):
            try:
                proc = subprocess.run(["qemu-system-x86_64", "-accel", "kvm", "-m", "256", "-nographic", "-no-reboot",
                                       "-kernel", str(image.kernel), "-append", "console=ttyS0 panic=-1",
                                       "-nic", "none"], capture_output=True, text=True, timeout=KVM_PROBE_SECONDS)
                _kvm = "Linux version" in proc.stdout
            except subprocess.TimeoutExpired as e:
                _kvm = "Linux version" in (e.stdout or b"").decode(errors="replace")
    return _kvm
