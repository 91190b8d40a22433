/* Intrusive doubly-linked circular lists. */
#ifndef TMX_UTIL_LIST_H
#define TMX_UTIL_LIST_H

#include <stddef.h>

typedef struct tmx_list {
    struct tmx_list *prev, *next;
} tmx_list_t;

#define tmx_container_of(_ptr, _type, _member) ((_type *)((char *)(_ptr) - offsetof(_type, _member)))

static inline void tmx_list_init(tmx_list_t *head)
{
    head->prev = head->next = head;
}

static inline int tmx_list_is_empty(const tmx_list_t *head)
{
    return head->next == head;
}

static inline void tmx_list_insert_after(tmx_list_t *pos, tmx_list_t *elem)
{
    elem->prev       = pos;
    elem->next       = pos->next;
    pos->next->prev  = elem;
    pos->next        = elem;
}

static inline void tmx_list_add_tail(tmx_list_t *head, tmx_list_t *elem)
{
    tmx_list_insert_after(head->prev, elem);
}

static inline void tmx_list_add_head(tmx_list_t *head, tmx_list_t *elem)
{
    tmx_list_insert_after(head, elem);
}

static inline void tmx_list_del(tmx_list_t *elem)
{
    elem->prev->next = elem->next;
    elem->next->prev = elem->prev;
    elem->prev = elem->next = elem;
}

static inline tmx_list_t *tmx_list_pop_head(tmx_list_t *head)
{
    tmx_list_t *e = head->next;
    if (e == head) {
        return NULL;
    }
    tmx_list_del(e);
    return e;
}

#define tmx_list_for_each_safe(_pos, _tmp, _head)                                                 \
    for ((_pos) = (_head)->next, (_tmp) = (_pos)->next; (_pos) != (_head);                         \
         (_pos) = (_tmp), (_tmp) = (_pos)->next)

#define tmx_list_for_each(_pos, _head) for ((_pos) = (_head)->next; (_pos) != (_head); (_pos) = (_pos)->next)

#endif
