//! Second, deliberately naive implementations of the policies (plain vectors, linear
//! scans), written from the papers' pseudocode and independent of `sluice-policy`'s data
//! structures. Golden tests compare the real simulator against them request by request.
//! Capacity is an object count; every object weighs 1 (except MAXS, which ranks by size).

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};

/// One naive policy run: returns the per-request hit flags.
pub fn run(name: &str, cap: usize, reqs: &[(u64, u64)]) -> Vec<bool> {
    match name {
        "lru" => lru(cap, reqs),
        "fifo" => fifo(cap, reqs),
        "lfu" => lfu(cap, reqs),
        "lfu-da" | "gdsf" => lfu_da(cap, reqs),
        "maxs" => maxs(cap, reqs),
        "sieve" => sieve(cap, reqs),
        "s3-fifo" => s3fifo(cap, reqs),
        "arc" => arc(cap, reqs),
        "belady" => belady(cap, reqs),
        other => panic!("no naive {other}"),
    }
}

/// Policies with a naive twin.
pub const NAMES: &[&str] = &["lru", "fifo", "lfu", "lfu-da", "gdsf", "maxs", "sieve", "s3-fifo", "arc", "belady"];

fn lru(cap: usize, reqs: &[(u64, u64)]) -> Vec<bool> {
    let mut v: Vec<u64> = Vec::new(); // least recent first
    reqs.iter()
        .map(|&(id, _)| {
            if let Some(p) = v.iter().position(|&x| x == id) {
                v.remove(p);
                v.push(id);
                return true;
            }
            if v.len() == cap {
                v.remove(0);
            }
            v.push(id);
            false
        })
        .collect()
}

fn fifo(cap: usize, reqs: &[(u64, u64)]) -> Vec<bool> {
    let mut q: VecDeque<u64> = VecDeque::new();
    reqs.iter()
        .map(|&(id, _)| {
            if q.contains(&id) {
                return true;
            }
            if q.len() == cap {
                q.pop_front();
            }
            q.push_back(id);
            false
        })
        .collect()
}

fn lfu(cap: usize, reqs: &[(u64, u64)]) -> Vec<bool> {
    let mut v: Vec<(u64, u64, usize)> = Vec::new(); // id, count, last access
    reqs.iter()
        .enumerate()
        .map(|(t, &(id, _))| {
            if let Some(e) = v.iter_mut().find(|e| e.0 == id) {
                e.1 += 1;
                e.2 = t;
                return true;
            }
            if v.len() == cap {
                let p = (0..v.len()).min_by_key(|&i| (v[i].1, v[i].2)).unwrap();
                v.remove(p);
            }
            v.push((id, 1, t));
            false
        })
        .collect()
}

fn lfu_da(cap: usize, reqs: &[(u64, u64)]) -> Vec<bool> {
    let mut v: Vec<(u64, u64, u64, usize)> = Vec::new(); // id, freq, key, last access
    let mut age = 0;
    reqs.iter()
        .enumerate()
        .map(|(t, &(id, _))| {
            if let Some(e) = v.iter_mut().find(|e| e.0 == id) {
                e.1 += 1;
                e.2 = age + e.1;
                e.3 = t;
                return true;
            }
            if v.len() == cap {
                let p = (0..v.len()).min_by_key(|&i| (v[i].2, v[i].3)).unwrap();
                age = v[p].2;
                v.remove(p);
            }
            v.push((id, 1, age + 1, t));
            false
        })
        .collect()
}

fn maxs(cap: usize, reqs: &[(u64, u64)]) -> Vec<bool> {
    let mut v: Vec<(u64, u64, usize)> = Vec::new(); // id, size, insert time
    reqs.iter()
        .enumerate()
        .map(|(t, &(id, size))| {
            if v.iter().any(|e| e.0 == id) {
                return true;
            }
            if v.len() == cap {
                let p = (0..v.len()).max_by_key(|&i| (v[i].1, std::cmp::Reverse(v[i].2))).unwrap();
                v.remove(p);
            }
            v.push((id, size, t));
            false
        })
        .collect()
}

/// SIEVE from the paper's pseudocode: index 0 is the tail (oldest), the end is the head.
fn sieve(cap: usize, reqs: &[(u64, u64)]) -> Vec<bool> {
    let mut q: Vec<(u64, bool)> = Vec::new();
    let mut hand: Option<usize> = None;
    reqs.iter()
        .map(|&(id, _)| {
            if let Some(e) = q.iter_mut().find(|e| e.0 == id) {
                e.1 = true;
                return true;
            }
            if q.len() == cap {
                let mut p = hand.unwrap_or(0);
                while q[p].1 {
                    q[p].1 = false;
                    p = if p + 1 == q.len() { 0 } else { p + 1 };
                }
                q.remove(p);
                hand = if p < q.len() { Some(p) } else { None };
            }
            q.push((id, false));
            false
        })
        .collect()
}

/// S3-FIFO from the paper: S is 10% of the cache, G remembers as many ids as M's 90%;
/// promotion from S on one hit; M is a 2-bit CLOCK.
fn s3fifo(cap: usize, reqs: &[(u64, u64)]) -> Vec<bool> {
    let s_cap = ((cap as f64 * 0.1) as usize).clamp(1, cap);
    let g_cap = cap - s_cap;
    let mut s: VecDeque<u64> = VecDeque::new(); // front = newest
    let mut m: VecDeque<u64> = VecDeque::new();
    let mut g: VecDeque<u64> = VecDeque::new();
    let mut freq: HashMap<u64, u8> = HashMap::new();
    let mut out = Vec::new();
    for &(id, _) in reqs {
        if s.contains(&id) || m.contains(&id) {
            let f = freq.get_mut(&id).unwrap();
            *f = (*f + 1).min(3);
            out.push(true);
            continue;
        }
        out.push(false);
        // evict until there is room for one
        while s.len() + m.len() >= cap {
            if s.len() >= s_cap || m.is_empty() {
                let t = s.pop_back().unwrap();
                if freq[&t] >= 1 {
                    freq.insert(t, 0);
                    m.push_front(t);
                } else {
                    freq.remove(&t);
                    g.push_front(t);
                    if g.len() > g_cap {
                        g.pop_back();
                    }
                    break;
                }
            } else {
                let t = m.pop_back().unwrap();
                if freq[&t] > 0 {
                    *freq.get_mut(&t).unwrap() -= 1;
                    m.push_front(t);
                } else {
                    freq.remove(&t);
                    break;
                }
            }
        }
        freq.insert(id, 0);
        if let Some(p) = g.iter().position(|&x| x == id) {
            g.remove(p);
            m.push_front(id);
        } else {
            s.push_front(id);
        }
    }
    out
}

/// ARC, figure 4 of Megiddo and Modha (2003), verbatim; lists hold most recent first.
fn arc(c: usize, reqs: &[(u64, u64)]) -> Vec<bool> {
    let (mut t1, mut t2, mut b1, mut b2): (Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>) = Default::default();
    let mut p = 0usize;
    fn take(l: &mut Vec<u64>, x: u64) -> bool {
        l.iter().position(|&y| y == x).map(|i| l.remove(i)).is_some()
    }
    fn replace(t1: &mut Vec<u64>, t2: &mut Vec<u64>, b1: &mut Vec<u64>, b2: &mut Vec<u64>, p: usize, x_in_b2: bool) {
        if !t1.is_empty() && (t1.len() > p || (x_in_b2 && t1.len() == p)) {
            let y = t1.pop().unwrap();
            b1.insert(0, y);
        } else {
            let y = t2.pop().unwrap();
            b2.insert(0, y);
        }
    }
    let mut out = Vec::new();
    for &(x, _) in reqs {
        if take(&mut t1, x) || take(&mut t2, x) {
            t2.insert(0, x);
            out.push(true);
            continue;
        }
        out.push(false);
        if b1.contains(&x) {
            let d = if b1.len() >= b2.len() { 1 } else { b2.len() / b1.len() };
            p = (p + d).min(c);
            replace(&mut t1, &mut t2, &mut b1, &mut b2, p, false);
            take(&mut b1, x);
            t2.insert(0, x);
        } else if b2.contains(&x) {
            let d = if b2.len() >= b1.len() { 1 } else { b1.len() / b2.len() };
            p = p.saturating_sub(d);
            replace(&mut t1, &mut t2, &mut b1, &mut b2, p, true);
            take(&mut b2, x);
            t2.insert(0, x);
        } else {
            let l1 = t1.len() + b1.len();
            let total = l1 + t2.len() + b2.len();
            if l1 == c {
                if t1.len() < c {
                    b1.pop();
                    replace(&mut t1, &mut t2, &mut b1, &mut b2, p, false);
                } else {
                    t1.pop();
                }
            } else if total >= c {
                if total == 2 * c {
                    b2.pop();
                }
                replace(&mut t1, &mut t2, &mut b1, &mut b2, p, false);
            }
            t1.insert(0, x);
        }
    }
    out
}

/// Belady's MIN with bypass: on a miss with a full cache, the object (newcomer included)
/// whose next use is furthest away is not kept; never-reused objects are not cached.
fn belady(cap: usize, reqs: &[(u64, u64)]) -> Vec<bool> {
    let next_use = |t: usize, id: u64| reqs[t + 1..].iter().position(|r| r.0 == id).map_or(usize::MAX, |d| t + 1 + d);
    let mut cache: Vec<(u64, usize)> = Vec::new(); // id, next use
    reqs.iter()
        .enumerate()
        .map(|(t, &(id, _))| {
            let n = next_use(t, id);
            if let Some(e) = cache.iter_mut().find(|e| e.0 == id) {
                e.1 = n;
                return true;
            }
            if n == usize::MAX {
                return false;
            }
            if cache.len() == cap {
                let p = (0..cache.len()).max_by_key(|&i| cache[i].1).unwrap();
                if cache[p].1 <= n {
                    return false;
                }
                cache.remove(p);
            }
            cache.push((id, n));
            false
        })
        .collect()
}
