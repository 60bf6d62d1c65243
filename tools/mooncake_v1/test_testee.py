#!/usr/bin/env python3
"""Self-check of tools/mooncake_v1/testee.py that needs neither vLLM nor the engine package (standard library only;
run by scripts/test.sh): its memory lands at the runner's addresses with the provenance pattern, it refuses an
address already mapped, and without the connector installed it still says hello and answers `start` with the
reason instead of dying."""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import testee  # noqa: E402

BASE = 0x5F00_0000_0000  # an address no test elsewhere maps


def layout(base, regions=2, block_len=2048, num_blocks=4):
    return {"kv_caches_base_addr": [base + r * 0x10000 for r in range(regions)], "block_lens": [block_len] * regions,
            "num_blocks": num_blocks}


class RegionsTest(unittest.TestCase):
    def test_provenance_at_the_given_addresses(self):
        r = testee.Regions(layout(BASE))
        self.assertEqual(r.read(BASE, 8), "00" * 8)  # zeroed
        r.fill_provenance()
        for region, block, word in ((0, 0, 0), (1, 3, 255), (0, 2, 17)):
            addr = BASE + region * 0x10000 + block * 2048 + word * 8
            got = int.from_bytes(bytes.fromhex(r.read(addr, 8)), "little")
            self.assertEqual(got, (0x4D43 << 48) | (region << 36) | (block << 16) | word)
        with self.assertRaises(ValueError):
            r.read(BASE + 4 * 2048 - 4, 8)  # past the region's end

    def test_an_address_in_use_is_refused(self):
        testee.Regions(layout(BASE + 0x100_0000, regions=1))
        with self.assertRaisesRegex(OSError, "cannot map"):
            testee.Regions(layout(BASE + 0x100_0000, regions=1))

    def test_layouts_it_cannot_hold(self):
        with self.assertRaisesRegex(ValueError, "page-aligned"):
            testee.Regions(layout(BASE + 0x200_0008, regions=1))
        with self.assertRaisesRegex(ValueError, "parallel"):
            testee.Regions({"kv_caches_base_addr": [BASE], "block_lens": [], "num_blocks": 1})


class ProtocolTest(unittest.TestCase):
    def test_hello_and_a_clear_refusal_without_the_connector(self):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        cmds = [{"cmd": "status"},
                {"cmd": "start", "role": "decoder", "revision": testee.REVISION, "config": {"layout": layout(BASE)}},
                {"cmd": "start", "role": "bootstrap"}, "not json", {"cmd": "stop"}]
        p = subprocess.run([sys.executable, "-I", os.path.join(HERE, "testee.py")], env=env, timeout=60,
                           input="".join((c if isinstance(c, str) else json.dumps(c)) + "\n" for c in cmds),
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        lines = [json.loads(x) for x in p.stdout.splitlines()]
        self.assertEqual(lines[0]["hello"], "mooncake-testee")
        self.assertEqual(lines[0]["revisions"], [testee.REVISION])
        self.assertEqual(lines[1], {"ok": False, "error": "no role started for status"})
        self.assertFalse(lines[2]["ok"])
        self.assertIn("cannot import mooncake.mooncake_connector_v1", lines[2]["error"])
        self.assertEqual(lines[3], {"ok": False, "error": "unsupported: role bootstrap"})
        self.assertIn("bad command line", lines[4]["error"])
        self.assertEqual(lines[5], {"ok": True})
        self.assertEqual(len(lines), 6)


if __name__ == "__main__":
    unittest.main()
