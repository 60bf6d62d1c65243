//! CPython 3.11's `list.sort()` (timsort with the powersort merge policy, `Objects/listobject.c`), with a
//! comparison that may fail.
//!
//! `json.dumps(sort_keys=True)` sorts a dict's `(key, value)` items with `list.sort()`. When every pair of
//! keys is ordered, any correct stable sort gives the same result; when they are not (a NaN key, or keys of
//! types that cannot be compared), the output order or the `TypeError` raised depends on exactly which
//! comparisons CPython makes and in which order. This port makes the same comparisons in the same order:
//! `count_run`, `binarysort`, `gallop_left`/`gallop_right`, `merge_lo`/`merge_hi`, the powersort run stack,
//! `min_gallop` adaptation. It is checked against Python by the differential test in `tests/hash_python.rs`.

const MIN_GALLOP: usize = 7;

struct Run {
    base: usize,
    len: usize,
    power: u32,
}

struct State<'a, T, E> {
    v: &'a mut [T],
    lt: &'a mut dyn FnMut(&T, &T) -> Result<bool, E>,
    min_gallop: usize,
    pending: Vec<Run>,
}

/// Sorts `v` in place exactly as CPython 3.11's `list.sort()` would with `lt` as `<`. On an error the slice is
/// left in some permutation of its elements (as in CPython) and the error is returned.
pub(crate) fn list_sort<T: Copy, E>(v: &mut [T], lt: &mut dyn FnMut(&T, &T) -> Result<bool, E>) -> Result<(), E> {
    let n = v.len();
    if n < 2 {
        return Ok(());
    }
    let mut st = State { v, lt, min_gallop: MIN_GALLOP, pending: Vec::new() };
    let minrun = compute_minrun(n);
    let mut lo = 0;
    let mut remaining = n;
    while remaining > 0 {
        let (mut run, descending) = st.count_run(lo, lo + remaining)?;
        if descending {
            st.v[lo..lo + run].reverse();
        }
        if run < minrun {
            let force = remaining.min(minrun);
            st.binarysort(lo, lo + force, lo + run)?;
            run = force;
        }
        st.found_new_run(run, n)?;
        st.pending.push(Run { base: lo, len: run, power: 0 });
        lo += run;
        remaining -= run;
    }
    // merge_force_collapse
    while st.pending.len() > 1 {
        let mut i = st.pending.len() - 2;
        if i > 0 && st.pending[i - 1].len < st.pending[i + 1].len {
            i -= 1;
        }
        st.merge_at(i)?;
    }
    Ok(())
}

fn compute_minrun(mut n: usize) -> usize {
    let mut r = 0;
    while n >= 64 {
        r |= n & 1;
        n >>= 1;
    }
    n + r
}

/// The powersort "power" of the boundary between run [s1, s1+n1) and the next run of length n2.
fn powerloop(s1: usize, n1: usize, n2: usize, n: usize) -> u32 {
    let mut result = 0;
    let mut a = 2 * s1 + n1;
    let mut b = a + n1 + n2;
    loop {
        result += 1;
        if a >= n {
            a -= n;
            b -= n;
        } else if b >= n {
            break;
        }
        a <<= 1;
        b <<= 1;
    }
    result
}

impl<T: Copy, E> State<'_, T, E> {
    fn lt(&mut self, a: T, b: T) -> Result<bool, E> {
        (self.lt)(&a, &b)
    }

    /// Length of the run starting at `lo` (strictly descending, or non-descending) and whether it descends.
    fn count_run(&mut self, lo: usize, hi: usize) -> Result<(usize, bool), E> {
        if lo + 1 == hi {
            return Ok((1, false));
        }
        let mut n = 2;
        let mut i = lo + 1;
        if self.lt(self.v[i], self.v[i - 1])? {
            i += 1;
            while i < hi {
                if !self.lt(self.v[i], self.v[i - 1])? {
                    break;
                }
                i += 1;
                n += 1;
            }
            Ok((n, true))
        } else {
            i += 1;
            while i < hi {
                if self.lt(self.v[i], self.v[i - 1])? {
                    break;
                }
                i += 1;
                n += 1;
            }
            Ok((n, false))
        }
    }

    /// Binary insertion sort of [lo, hi), where [lo, start) is already sorted.
    fn binarysort(&mut self, lo: usize, hi: usize, mut start: usize) -> Result<(), E> {
        if lo == start {
            start += 1;
        }
        while start < hi {
            let pivot = self.v[start];
            let (mut l, mut r) = (lo, start);
            loop {
                let p = l + ((r - l) >> 1);
                if self.lt(pivot, self.v[p])? {
                    r = p;
                } else {
                    l = p + 1;
                }
                if l >= r {
                    break;
                }
            }
            self.v.copy_within(l..start, l + 1);
            self.v[l] = pivot;
            start += 1;
        }
        Ok(())
    }

    fn found_new_run(&mut self, n2: usize, listlen: usize) -> Result<(), E> {
        if let Some(top) = self.pending.last() {
            let power = powerloop(top.base, top.len, n2, listlen);
            while self.pending.len() > 1 && self.pending[self.pending.len() - 2].power > power {
                let i = self.pending.len() - 2;
                self.merge_at(i)?;
            }
            self.pending.last_mut().expect("non-empty").power = power;
        }
        Ok(())
    }

    fn merge_at(&mut self, i: usize) -> Result<(), E> {
        let (mut base_a, mut na) = (self.pending[i].base, self.pending[i].len);
        let (base_b, mut nb) = (self.pending[i + 1].base, self.pending[i + 1].len);
        self.pending[i].len = na + nb;
        self.pending.remove(i + 1);
        // Where does b start in a?
        let k = gallop_right_in(&self.v[base_a..base_a + na], self.v[base_b], 0, self.lt)?;
        base_a += k;
        na -= k;
        if na == 0 {
            return Ok(());
        }
        // Where does a end in b?
        nb = gallop_left_in(&self.v[base_b..base_b + nb], self.v[base_a + na - 1], nb - 1, self.lt)?;
        if nb == 0 {
            return Ok(());
        }
        if na <= nb {
            self.merge_lo(base_a, na, base_b, nb)
        } else {
            self.merge_hi(base_a, na, base_b, nb)
        }
    }

    /// Merges adjacent runs a = v[pa..pa+na] and b = v[pb..pb+nb] (pb = pa + na) when na <= nb, copying a aside.
    fn merge_lo(&mut self, pa: usize, na: usize, pb: usize, nb: usize) -> Result<(), E> {
        let tmp: Vec<T> = self.v[pa..pa + na].to_vec();
        let (mut na, mut nb) = (na, nb);
        let mut dest = pa;
        let mut ia = 0; // index into tmp
        let mut ib = pb; // index into v
        self.v[dest] = self.v[ib];
        dest += 1;
        ib += 1;
        nb -= 1;
        let mut result = Ok(());
        'outer: {
            if nb == 0 {
                break 'outer;
            }
            if na == 1 {
                {
                    self.copy_b_lo(&tmp, ia, dest, ib, nb);
                    return Ok(());
                }
            }
            let mut min_gallop = self.min_gallop;
            loop {
                let mut acount = 0;
                let mut bcount = 0;
                loop {
                    match (self.lt)(&self.v[ib], &tmp[ia]) {
                        Err(e) => {
                            result = Err(e);
                            break 'outer;
                        }
                        Ok(true) => {
                            self.v[dest] = self.v[ib];
                            dest += 1;
                            ib += 1;
                            bcount += 1;
                            acount = 0;
                            nb -= 1;
                            if nb == 0 {
                                break 'outer;
                            }
                            if bcount >= min_gallop {
                                break;
                            }
                        }
                        Ok(false) => {
                            self.v[dest] = tmp[ia];
                            dest += 1;
                            ia += 1;
                            acount += 1;
                            bcount = 0;
                            na -= 1;
                            if na == 1 {
                                {
                                    self.copy_b_lo(&tmp, ia, dest, ib, nb);
                                    return Ok(());
                                }
                            }
                            if acount >= min_gallop {
                                break;
                            }
                        }
                    }
                }
                min_gallop += 1;
                loop {
                    min_gallop -= (min_gallop > 1) as usize;
                    self.min_gallop = min_gallop;
                    let k = match gallop_right_in(&tmp[ia..ia + na], self.v[ib], 0, self.lt) {
                        Ok(k) => k,
                        Err(e) => {
                            result = Err(e);
                            break 'outer;
                        }
                    };
                    acount = k;
                    if k > 0 {
                        self.v[dest..dest + k].copy_from_slice(&tmp[ia..ia + k]);
                        dest += k;
                        ia += k;
                        na -= k;
                        if na == 1 {
                            {
                                self.copy_b_lo(&tmp, ia, dest, ib, nb);
                                return Ok(());
                            }
                        }
                        if na == 0 {
                            break 'outer;
                        }
                    }
                    self.v[dest] = self.v[ib];
                    dest += 1;
                    ib += 1;
                    nb -= 1;
                    if nb == 0 {
                        break 'outer;
                    }
                    let k = match gallop_left_in(&self.v[ib..ib + nb], tmp[ia], 0, self.lt) {
                        Ok(k) => k,
                        Err(e) => {
                            result = Err(e);
                            break 'outer;
                        }
                    };
                    bcount = k;
                    if k > 0 {
                        self.v.copy_within(ib..ib + k, dest);
                        dest += k;
                        ib += k;
                        nb -= k;
                        if nb == 0 {
                            break 'outer;
                        }
                    }
                    self.v[dest] = tmp[ia];
                    dest += 1;
                    ia += 1;
                    na -= 1;
                    if na == 1 {
                        {
                            self.copy_b_lo(&tmp, ia, dest, ib, nb);
                            return Ok(());
                        }
                    }
                    if !(acount >= MIN_GALLOP || bcount >= MIN_GALLOP) {
                        break;
                    }
                }
                min_gallop += 1;
                self.min_gallop = min_gallop;
            }
        }
        // Succeed or Fail: the rest of a goes back in place.
        if na > 0 {
            self.v[dest..dest + na].copy_from_slice(&tmp[ia..ia + na]);
        }
        result
    }

    /// merge_lo's CopyB: the last element of a belongs at the end of the merge.
    fn copy_b_lo(&mut self, tmp: &[T], ia: usize, dest: usize, ib: usize, nb: usize) {
        self.v.copy_within(ib..ib + nb, dest);
        self.v[dest + nb] = tmp[ia];
    }

    /// Merges adjacent runs a = v[pa..pa+na] and b = v[pb..pb+nb] when na > nb, copying b aside and merging
    /// from the right.
    fn merge_hi(&mut self, pa: usize, na: usize, pb: usize, nb: usize) -> Result<(), E> {
        let tmp: Vec<T> = self.v[pb..pb + nb].to_vec();
        let (mut na, mut nb) = (na, nb);
        // Positions are "one past" indexes so they never go below zero: dest_end = dest + 1 etc.
        let mut dest = pb + nb; // one past the next slot to fill
        let mut ia = pa + na; // one past the last unmerged element of a (in v)
        let mut ib = nb; // one past the last unmerged element of b (in tmp)
        dest -= 1;
        ia -= 1;
        self.v[dest] = self.v[ia];
        na -= 1;
        let mut result = Ok(());
        'outer: {
            if na == 0 {
                break 'outer;
            }
            if nb == 1 {
                {
                    self.copy_a_hi(&tmp, dest, ia, na);
                    return Ok(());
                }
            }
            let mut min_gallop = self.min_gallop;
            loop {
                let mut acount = 0;
                let mut bcount = 0;
                loop {
                    match (self.lt)(&tmp[ib - 1], &self.v[ia - 1]) {
                        Err(e) => {
                            result = Err(e);
                            break 'outer;
                        }
                        Ok(true) => {
                            dest -= 1;
                            ia -= 1;
                            self.v[dest] = self.v[ia];
                            acount += 1;
                            bcount = 0;
                            na -= 1;
                            if na == 0 {
                                break 'outer;
                            }
                            if acount >= min_gallop {
                                break;
                            }
                        }
                        Ok(false) => {
                            dest -= 1;
                            ib -= 1;
                            self.v[dest] = tmp[ib];
                            bcount += 1;
                            acount = 0;
                            nb -= 1;
                            if nb == 1 {
                                {
                                    self.copy_a_hi(&tmp, dest, ia, na);
                                    return Ok(());
                                }
                            }
                            if bcount >= min_gallop {
                                break;
                            }
                        }
                    }
                }
                min_gallop += 1;
                loop {
                    min_gallop -= (min_gallop > 1) as usize;
                    self.min_gallop = min_gallop;
                    let k = match gallop_right_in(&self.v[pa..pa + na], tmp[ib - 1], na - 1, self.lt) {
                        Ok(k) => k,
                        Err(e) => {
                            result = Err(e);
                            break 'outer;
                        }
                    };
                    let k = na - k;
                    acount = k;
                    if k > 0 {
                        dest -= k;
                        ia -= k;
                        self.v.copy_within(ia..ia + k, dest);
                        na -= k;
                        if na == 0 {
                            break 'outer;
                        }
                    }
                    dest -= 1;
                    ib -= 1;
                    self.v[dest] = tmp[ib];
                    nb -= 1;
                    if nb == 1 {
                        {
                            self.copy_a_hi(&tmp, dest, ia, na);
                            return Ok(());
                        }
                    }
                    let k = match gallop_left_in(&tmp[..nb], self.v[ia - 1], nb - 1, self.lt) {
                        Ok(k) => k,
                        Err(e) => {
                            result = Err(e);
                            break 'outer;
                        }
                    };
                    let k = nb - k;
                    bcount = k;
                    if k > 0 {
                        dest -= k;
                        ib -= k;
                        self.v[dest..dest + k].copy_from_slice(&tmp[ib..ib + k]);
                        nb -= k;
                        if nb == 1 {
                            {
                                self.copy_a_hi(&tmp, dest, ia, na);
                                return Ok(());
                            }
                        }
                        if nb == 0 {
                            break 'outer;
                        }
                    }
                    dest -= 1;
                    ia -= 1;
                    self.v[dest] = self.v[ia];
                    na -= 1;
                    if na == 0 {
                        break 'outer;
                    }
                    if !(acount >= MIN_GALLOP || bcount >= MIN_GALLOP) {
                        break;
                    }
                }
                min_gallop += 1;
                self.min_gallop = min_gallop;
            }
        }
        if nb > 0 {
            self.v[dest - nb..dest].copy_from_slice(&tmp[..nb]);
        }
        result
    }

    /// merge_hi's CopyA: the first element of b belongs at the front of the merge.
    fn copy_a_hi(&mut self, tmp: &[T], dest: usize, ia: usize, na: usize) {
        // v[ia-na..ia] moves right to end just before dest; tmp[0] goes in front of it.
        self.v.copy_within(ia - na..ia, dest - na);
        self.v[dest - na - 1] = tmp[0];
    }
}

/// CPython's `gallop_left`: the leftmost position in sorted `a` where `key` belongs (`a[k-1] < key <= a[k]`),
/// searching outward from `hint`.
fn gallop_left_in<T: Copy, E>(
    a: &[T],
    key: T,
    hint: usize,
    lt: &mut dyn FnMut(&T, &T) -> Result<bool, E>,
) -> Result<usize, E> {
    let n = a.len();
    let mut lastofs = 0;
    let mut ofs = 1;
    let lo_plus_one;
    if lt(&a[hint], &key)? {
        let maxofs = n - hint;
        while ofs < maxofs {
            if lt(&a[hint + ofs], &key)? {
                lastofs = ofs;
                ofs = (ofs << 1) + 1;
            } else {
                break;
            }
        }
        ofs = ofs.min(maxofs);
        lo_plus_one = lastofs + hint + 1;
        ofs += hint;
    } else {
        let maxofs = hint + 1;
        while ofs < maxofs {
            if lt(&a[hint - ofs], &key)? {
                break;
            }
            lastofs = ofs;
            ofs = (ofs << 1) + 1;
        }
        ofs = ofs.min(maxofs);
        let k = lastofs;
        lo_plus_one = hint + 1 - ofs;
        ofs = hint - k;
    }
    let mut lastofs = lo_plus_one;
    while lastofs < ofs {
        let m = lastofs + ((ofs - lastofs) >> 1);
        if lt(&a[m], &key)? {
            lastofs = m + 1;
        } else {
            ofs = m;
        }
    }
    Ok(ofs)
}

/// CPython's `gallop_right`: the rightmost position in sorted `a` where `key` belongs (`a[k-1] <= key < a[k]`),
/// searching outward from `hint`.
fn gallop_right_in<T: Copy, E>(
    a: &[T],
    key: T,
    hint: usize,
    lt: &mut dyn FnMut(&T, &T) -> Result<bool, E>,
) -> Result<usize, E> {
    let n = a.len();
    let mut lastofs = 0;
    let mut ofs = 1;
    let lo_plus_one;
    if lt(&key, &a[hint])? {
        let maxofs = hint + 1;
        while ofs < maxofs {
            if lt(&key, &a[hint - ofs])? {
                lastofs = ofs;
                ofs = (ofs << 1) + 1;
            } else {
                break;
            }
        }
        ofs = ofs.min(maxofs);
        let k = lastofs;
        lo_plus_one = hint + 1 - ofs;
        ofs = hint - k;
    } else {
        let maxofs = n - hint;
        while ofs < maxofs {
            if lt(&key, &a[hint + ofs])? {
                break;
            }
            lastofs = ofs;
            ofs = (ofs << 1) + 1;
        }
        ofs = ofs.min(maxofs);
        lo_plus_one = lastofs + hint + 1;
        ofs += hint;
    }
    let mut lastofs = lo_plus_one;
    while lastofs < ofs {
        let m = lastofs + ((ofs - lastofs) >> 1);
        if lt(&key, &a[m])? {
            ofs = m;
        } else {
            lastofs = m + 1;
        }
    }
    Ok(ofs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn sorts_and_is_stable() {
        let mut seed = 7;
        for n in [0usize, 1, 2, 3, 10, 63, 64, 65, 100, 257, 1000, 5000] {
            for modulus in [2u64, 10, 1000, u64::MAX] {
                let keys: Vec<u64> = (0..n).map(|_| lcg(&mut seed) % modulus).collect();
                let mut idx: Vec<usize> = (0..n).collect();
                list_sort::<usize, ()>(&mut idx, &mut |a, b| Ok(keys[*a] < keys[*b])).unwrap();
                let mut want: Vec<usize> = (0..n).collect();
                want.sort_by_key(|i| keys[*i]);
                assert_eq!(idx, want, "n={n} modulus={modulus}");
            }
        }
        // Runs that trigger galloping: sorted blocks interleaved.
        let keys: Vec<u64> = (0..3000).map(|i| if i < 1500 { i * 2 } else { (i - 1500) * 2 + 1 }).collect();
        let mut idx: Vec<usize> = (0..keys.len()).collect();
        list_sort::<usize, ()>(&mut idx, &mut |a, b| Ok(keys[*a] < keys[*b])).unwrap();
        assert!(idx.windows(2).all(|w| keys[w[0]] <= keys[w[1]]));
    }

    #[test]
    fn errors_propagate() {
        let mut v = vec![3, 1, 2];
        assert_eq!(
            list_sort(&mut v, &mut |a: &i32, b: &i32| if *a == 2 || *b == 2 { Err("boom") } else { Ok(a < b) }),
            Err("boom")
        );
    }
}
