#!/usr/bin/env python3
"""Self-check of tools/mooncake_v1/testee.py and live.py that needs neither vLLM nor the engine package (standard
library only; run by scripts/test.sh): the driver's memory lands at the runner's addresses with the provenance
pattern, it refuses an address already mapped, and without the connector installed it still says hello and
answers `start` with the reason instead of dying; live.py's TP plan gives every prefiller rank blocks of its own, so
its word-for-word check tells a block of the right rank from the same block of another rank."""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import live  # noqa: E402
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


class LiveTpTest(unittest.TestCase):
    def test_every_rank_holds_blocks_of_its_own(self):
        self.assertGreaterEqual(live.MAX_TP, 2)
        held = {}
        for rank in range(live.MAX_TP):
            for _, ps, _ in live.REQS:
                for b in live.p_blocks(ps, rank):
                    self.assertLess(b, live.NUM_BLOCKS)
                    self.assertNotIn(b, held, f"block {b} of rank {rank} is also rank {held.get(b)}'s")
                    held[b] = rank
                    self.assertEqual(live.rank_of(b), rank)
        self.assertIsNone(live.rank_of(0))
        for kv_first in (False, True):  # every chunk of every rank's block inside the region
            for p, d, n in live.chunks(kv_first, max(held), 0):
                self.assertLessEqual(p + n, live.NUM_BLOCKS * live.BLOCK_LEN)

    def test_a_block_of_another_rank_is_told_apart(self):
        base = BASE + 0x300_0000
        regions = testee.Regions({"kv_caches_base_addr": [base, base + 0x10000], "block_lens": [live.BLOCK_LEN] * 2,
                                  "num_blocks": live.NUM_BLOCKS})
        regions.fill_provenance()
        p = live.REQS[0][1][0]
        theirs = live.p_blocks([p], 1)[0]
        for kv_first in (False, True):
            for (off, _, n), (mine, _, _) in zip(live.chunks(kv_first, theirs, 0), live.chunks(kv_first, p, 0)):
                sent = regions.read(base + 0x10000 + off, n)  # region 1 of prefiller rank 1, as it would land
                pattern = live.Pattern(False, kv_first)
                self.assertIsNone(pattern.problem(sent, 1, off))
                # what decoder rank 0 expects there: rank 0's block p
                why = pattern.problem(sent, 1, mine)
                bl = live.BLOCK_LEN
                self.assertRegex(why, f"^word 0: region 1 block {off // bl} word {off % bl // 8} "
                                      rf"\(prefiller rank 1's block {theirs}\), expected region 1 block "
                                      rf"{mine // bl} word {mine % bl // 8} \(prefiller rank 0's block {p}\)$")
        self.assertEqual(live.Pattern(False, False).problem(regions.read(base, 16)[:16] + "00" * 8, 0, 0),
                         "word 1: zero, expected region 0 block 0 word 1")

    def test_k_and_v_planes_as_regions_of_their_own(self):
        """The reference peer's FlashAttention layout: the same addresses as the layer's memory, K and V planes
        numbered as regions of half-block blocks; its provenance read where a layer's K or V half lies."""
        base = BASE + 0x400_0000
        split = live.layout(base, split=True)
        self.assertEqual(len(split["kv_caches_base_addr"]), 2 * live.REGIONS)
        regions = testee.Regions(split)
        regions.fill_provenance()
        p = live.p_blocks(live.REQS[1][1], 1)[-1]
        layer = live.layout(base)["kv_caches_base_addr"][1]
        for off, _, n in live.chunks(True, p, 0):
            sent = regions.read(layer + off, n)
            self.assertIsNone(live.Pattern(True, True).problem(sent, 1, off))
            self.assertIn(f"(prefiller rank 1's block {p})", live.Pattern(False, True).problem(sent, 1, off))

    def test_tp_sizes_it_cannot_plan_are_refused(self):
        for tp in (0, live.MAX_TP + 1):
            r = subprocess.run([sys.executable, os.path.join(HERE, "live.py"), "--mc-path", "-", "--peer", "-", "--tp",
                                str(tp)], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(f"--tp {tp}: 1 to {live.MAX_TP}", r.stderr)


if __name__ == "__main__":
    unittest.main()
