/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "macro.h"
#include "string-util.h"
#include "tools-internal.h"
#include "tools.h"
#include "workspace-path.h"

/* The workspace's tree for the system prompt, breadth first: every
 * directory of a level is shown before any file of it and before the next
 * level, each with the number of files below it, so that no directory
 * hides another however many files its neighbours hold; what the budget
 * leaves out is counted, never silently dropped. The walk itself is
 * bounded (levels, directories, entries): a huge tree costs the same as a
 * big one. */

#define TREE_LEVELS_MAX   8U
#define TREE_DIRS_MAX     4096U
#define TREE_NODES_MAX    65536U

typedef struct TreeNode {
        char *name;
        char *target;           /* a symlink's, shown */
        size_t parent;          /* SIZE_MAX: the top */
        unsigned depth;         /* the top's entries are 0 */
        bool dir, link, bulky, read, shown;
        uint64_t files;         /* regular files below a directory, as far as the walk went */
        bool files_more;        /* there are more than that: the walk stopped below */
        size_t first_child, n_children, n_shown; /* a directory's entries are contiguous */
        size_t n_files_shown;
} TreeNode;

typedef struct Tree {
        TreeNode *nodes;
        size_t n, allocated;
        bool cut;               /* the walk stopped somewhere */
} Tree;

static void tree_done(Tree *t) {
        for (size_t i = 0; i < t->n; i++) {
                free(t->nodes[i].name);
                free(t->nodes[i].target);
        }
        free(t->nodes);
        *t = (Tree) {};
}

/* Names of one directory: dot-entries after the others, each group sorted. */
static int entry_compare(const void *a, const void *b) {
        const char *x = *(char *const *) a, *y = *(char *const *) b;

        if ((x[0] == '.') != (y[0] == '.'))
                return x[0] == '.' ? 1 : -1;
        return strcmp(x, y);
}

static int tree_add(Tree *t, const char *name, size_t parent, unsigned depth) {
        if (t->n >= TREE_NODES_MAX) {
                t->cut = true;
                return 0;
        }
        if (t->n >= t->allocated) {
                size_t na = MAX(t->allocated * 2, (size_t) 256);
                TreeNode *nn = reallocarray(t->nodes, na, sizeof(TreeNode));
                if (!nn)
                        return -ENOMEM;
                t->nodes = nn;
                t->allocated = na;
        }
        t->nodes[t->n] = (TreeNode) { .name = strdup(name), .parent = parent, .depth = depth };
        if (!t->nodes[t->n].name)
                return -ENOMEM;
        t->n++;
        return 1;
}

/* Reads directory fd (node index dir, SIZE_MAX the top) into t: its
 * entries become nodes, in display order. Takes fd. */
static int tree_read_dir(Tree *t, int fd, size_t dir, unsigned depth, dev_t dev) {
        _cleanup_free_ char **names = NULL;
        size_t n = 0;
        DIR *d;
        int r;

        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        r = dir_read_names(d, TREE_NODES_MAX, entry_compare, &names, &n, &t->cut);

        for (size_t i = 0; r >= 0 && i < n; i++) {
                struct stat st;

                if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;       /* gone meanwhile */
                r = tree_add(t, names[i], dir, depth);
                if (r <= 0)
                        break;
                TreeNode *node = t->nodes + t->n - 1;
                if (S_ISLNK(st.st_mode)) {
                        node->link = true;
                        r = readlink_shown(dirfd(d), names[i], &node->target);
                } else if (S_ISDIR(st.st_mode)) {
                        node->dir = true;
                        /* SECURITY: other file systems are not walked. */
                        node->bulky = dir_is_bulky(names[i]) || st.st_dev != dev;
                } else if (S_ISREG(st.st_mode))
                        node->files = 1;
                if (dir != SIZE_MAX) {
                        if (t->nodes[dir].n_children++ == 0)
                                t->nodes[dir].first_child = t->n - 1;
                }
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        closedir(d);
        return r < 0 ? r : 0;
}

/* The path of node i, workspace-relative. */
static int tree_path(const Tree *t, size_t i, char **ret) {
        _cleanup_free_ char *p = NULL;

        for (size_t k = i; k != SIZE_MAX; k = t->nodes[k].parent) {
                char *np = NULL;
                if (asprintf(&np, "%s%s%s", t->nodes[k].name, p ? "/" : "", strempty(p)) < 0)
                        return -ENOMEM;
                free(p);
                p = np;
        }
        *ret = TAKE_PTR(p);
        return 0;
}

static int tree_walk(Tree *t, int ws_fd, dev_t dev) {
        unsigned dirs = 0;
        int fd, r;

        r = workspace_open(ws_fd, ".", O_RDONLY | O_DIRECTORY, 0, &fd);
        if (r < 0)
                return r;
        r = tree_read_dir(t, fd, SIZE_MAX, 0, dev);
        if (r < 0)
                return r;
        /* The nodes array is the queue: each directory's entries are added
         * after every node before it, level by level. */
        for (size_t i = 0; i < t->n; i++) {
                TreeNode *node = t->nodes + i;
                _cleanup_free_ char *path = NULL;

                if (!node->dir || node->bulky)
                        continue;
                if (node->depth + 1 >= TREE_LEVELS_MAX || dirs >= TREE_DIRS_MAX) {
                        node->files_more = true;
                        t->cut = true;
                        continue;
                }
                r = tree_path(t, i, &path);
                if (r < 0)
                        return r;
                r = workspace_open(ws_fd, path, O_RDONLY | O_DIRECTORY, 0, &fd);
                if (r < 0)
                        continue;       /* unreadable or gone: shown, not read */
                dirs++;
                t->nodes[i].read = true;
                r = tree_read_dir(t, fd, i, t->nodes[i].depth + 1, dev);
                if (r < 0)
                        return r;
        }
        /* Files below each directory: children come after their parents. */
        for (size_t i = t->n; i-- > 0;) {
                TreeNode *node = t->nodes + i;
                if (node->parent == SIZE_MAX)
                        continue;
                t->nodes[node->parent].files += node->files;
                t->nodes[node->parent].files_more |= node->files_more;
        }
        return 0;
}

/* Marks what is shown: level by level, a level's directories before its
 * files, until max entries; no directory shows more than a tenth of them
 * as files, so that one crowded directory leaves room for the next level. */
static unsigned tree_choose(Tree *t, unsigned max) {
        unsigned shown = 0, files_max = MAX(max / 10, 5U);
        size_t top_files = 0;
        size_t start = 0;

        while (start < t->n) {
                size_t end = start;
                unsigned depth = t->nodes[start].depth;
                while (end < t->n && t->nodes[end].depth == depth)
                        end++;
                for (int pass = 0; pass < 2; pass++)
                        for (size_t i = start; i < end; i++) {
                                TreeNode *node = t->nodes + i;
                                bool want = pass == 0 ? node->dir : !node->dir;
                                if (!want || (node->parent != SIZE_MAX && !t->nodes[node->parent].shown))
                                        continue;
                                if (pass == 1) {
                                        size_t *n = node->parent == SIZE_MAX ? &top_files :
                                                &t->nodes[node->parent].n_files_shown;
                                        if (*n >= files_max)
                                                continue;
                                        (*n)++;
                                }
                                if (shown >= max)
                                        return shown;
                                node->shown = true;
                                if (node->parent != SIZE_MAX)
                                        t->nodes[node->parent].n_shown++;
                                shown++;
                        }
                start = end;
        }
        return shown;
}

static int tree_print_node(const Tree *t, size_t i, Buf *out) {
        const TreeNode *node = t->nodes + i;
        int r;

        for (unsigned k = 0; k < node->depth; k++)
                if (buf_puts(out, "  ") < 0)
                        return -ENOMEM;
        if (node->link)
                return buf_printf(out, "%s -> %s\n", node->name, strempty(node->target));
        if (!node->dir)
                return buf_printf(out, "%s\n", node->name);
        if (node->bulky)
                return buf_printf(out, "%s/ (not shown)\n", node->name);
        r = buf_printf(out, "%s/ (%" PRIu64 "%s file%s)\n", node->name, node->files, node->files_more ? "+" : "",
                       node->files == 1 && !node->files_more ? "" : "s");
        if (r < 0)
                return r;
        /* Its entries, in the order they were read (display order). */
        for (size_t c = node->first_child; c < node->first_child + node->n_children; c++)
                if (t->nodes[c].shown) {
                        r = tree_print_node(t, c, out);
                        if (r < 0)
                                return r;
                }
        if (node->n_shown < node->n_children) {
                for (unsigned k = 0; k <= node->depth; k++)
                        if (buf_puts(out, "  ") < 0)
                                return -ENOMEM;
                return buf_printf(out, "... %zu more\n", node->n_children - node->n_shown);
        }
        return 0;
}

int workspace_tree(int ws_fd, unsigned max_entries, char **ret) {
        _cleanup_(tree_done) Tree t = {};
        _cleanup_(buf_done) Buf out = {};
        unsigned shown, top = 0, top_shown = 0;
        struct stat st;
        int r;

        assert(ret);

        if (fstat(ws_fd, &st) < 0)
                return -errno;
        r = tree_walk(&t, ws_fd, st.st_dev);
        if (r < 0)
                return r;
        shown = tree_choose(&t, max_entries);
        for (size_t i = 0; i < t.n && t.nodes[i].depth == 0; i++) {
                top++;
                if (t.nodes[i].shown) {
                        top_shown++;
                        r = tree_print_node(&t, i, &out);
                        if (r < 0)
                                return r;
                }
        }
        if (top_shown < top && buf_printf(&out, "... %u more\n", top - top_shown) < 0)
                return -ENOMEM;
        if ((shown < t.n || t.cut) &&
            buf_printf(&out, "[... %u of %s%zu entries shown; list_files shows a directory whole ...]\n", shown,
                       t.cut ? "more than " : "", t.n) < 0)
                return -ENOMEM;
        return buf_steal(&out, ret);
}
