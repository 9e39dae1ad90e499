# SPDX-License-Identifier: BSD-3-Clause
"""Linux guests in QEMU for scenario tests: the guest kernel and its initramfs (image), and the
QEMU process with its serial console (qemu). See README.md here."""
